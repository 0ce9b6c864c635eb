package e2bapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/safehttp"
)

// segment escapes one path segment (names may hold "/" and ":"), refusing
// an empty one, which would address another endpoint.
func segment(what, value string) (string, error) {
	if value == "" {
		return "", fmt.Errorf("%s is empty", what)
	}
	return url.PathEscape(value), nil
}

// CreateTemplateBuild registers a build (POST /v3/templates, 202): it
// creates the template or reuses the one the name resolves to.
func (c *Client) CreateTemplateBuild(ctx context.Context, req e2b.TemplateBuildRequestV3) (*e2b.TemplateRequestResponseV3, error) {
	var out e2b.TemplateRequestResponseV3
	if err := c.call(ctx, http.MethodPost, "/v3/templates", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetFileUploadLink asks whether the build context with files hash hash is
// stored and where to upload it (GET /templates/{id}/files/{hash}, 201).
func (c *Client) GetFileUploadLink(ctx context.Context, templateID, hash string) (*e2b.TemplateBuildFileUpload, error) {
	id, err := segment("template ID", templateID)
	if err != nil {
		return nil, err
	}
	if err := e2b.ValidateFilesHash(hash); err != nil {
		return nil, err
	}
	var out e2b.TemplateBuildFileUpload
	if err := c.call(ctx, http.MethodGet, "/templates/"+id+"/files/"+hash, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UploadArchive PUTs size bytes of archive to link.URL with link.Headers
// (except Content-Length, which is set exactly, so the body is never sent
// chunked: presigned storage URLs refuse that). No API key or other
// credential is sent there. The URL must be https, or http to a loopback
// host. Each attempt reads the archive from offset 0, so a retry sends the
// whole body again; attempts are bounded by Config.UploadTimeout.
func (c *Client) UploadArchive(ctx context.Context, link *e2b.TemplateBuildFileUpload, archive io.ReaderAt, size int64) error {
	if link == nil || link.URL == "" {
		return errors.New("upload link has no URL")
	}
	if size <= 0 {
		return fmt.Errorf("archive size is %d; a build context archive is never empty", size)
	}
	target, err := url.Parse(link.URL)
	if err != nil {
		return fmt.Errorf("upload URL is not a valid URL: %w", err)
	}
	// Logs and errors show the URL without its query: presigned URLs carry
	// their signature there.
	shown := (&url.URL{Scheme: target.Scheme, Host: target.Host, Path: target.Path}).String()
	if _, err := safehttp.ParseBaseURL("upload URL", shown); err != nil {
		return err
	}
	body := retryablehttp.ReaderFunc(func() (io.Reader, error) { return io.NewSectionReader(archive, 0, size), nil })
	ctx = withCallState(ctx, http.MethodPut, shown, target.RawQuery)
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPut, link.URL, body)
	if err != nil {
		return fmt.Errorf("upload to %s: %s", shown, c.redact(ctx, err.Error()))
	}
	req.ContentLength = size
	for name, value := range link.Headers {
		switch strings.ToLower(name) {
		case "content-length", "transfer-encoding", "host":
			continue
		}
		req.Header.Set(name, value)
	}
	req.Header.Set("User-Agent", c.userAgent)
	resp, err := c.upload.Do(req)
	if err != nil {
		return fmt.Errorf("upload to %s: %w", shown, redactedError{c.redact(ctx, err.Error()), err})
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		apiErr := c.apiError(ctx, http.MethodPut, target.Path, resp)
		apiErr.service = "build context storage at " + target.Host
		return apiErr
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBody))
	return nil
}

// StartBuild starts a registered build (POST /v2/templates/{id}/builds/{bid},
// 202). A build starts once; E2B refuses a second start with 400.
func (c *Client) StartBuild(ctx context.Context, templateID, buildID string, req e2b.TemplateBuildStartV2) error {
	id, err := segment("template ID", templateID)
	if err != nil {
		return err
	}
	bid, err := segment("build ID", buildID)
	if err != nil {
		return err
	}
	// The spec types steps and args as arrays: absent lists go as [], not null.
	steps := make([]e2b.TemplateStep, len(req.Steps))
	for i, step := range req.Steps {
		if step.Args == nil {
			step.Args = []string{}
		}
		steps[i] = step
	}
	req.Steps = steps
	err = c.call(ctx, http.MethodPost, "/v2/templates/"+id+"/builds/"+bid, nil, req, nil)
	return err
}

func buildPath(templateID, buildID string) (string, error) {
	id, err := segment("template ID", templateID)
	if err != nil {
		return "", err
	}
	bid, err := segment("build ID", buildID)
	if err != nil {
		return "", err
	}
	return "/templates/" + id + "/builds/" + bid, nil
}

// GetBuildStatus reads a build's status and the page of its log entries
// that starts at index logsOffset (GET /templates/{id}/builds/{bid}/status);
// math.MaxInt32 asks for the status alone. E2B answers an unknown build with
// 400, not 404 (IsBuildGone).
func (c *Client) GetBuildStatus(ctx context.Context, templateID, buildID string, logsOffset int32) (*e2b.TemplateBuildInfo, error) {
	path, err := buildPath(templateID, buildID)
	if err != nil {
		return nil, err
	}
	query := url.Values{"logsOffset": {strconv.Itoa(int(logsOffset))}}
	var out e2b.TemplateBuildInfo
	if err := c.call(ctx, http.MethodGet, path+"/status", query, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetTemplate reads a template and the first page of its builds
// (GET /templates/{id}). It takes a template ID only: E2B does not resolve
// names here.
func (c *Client) GetTemplate(ctx context.Context, templateID string) (*e2b.TemplateWithBuilds, error) {
	id, err := segment("template ID", templateID)
	if err != nil {
		return nil, err
	}
	var out e2b.TemplateWithBuilds
	if err := c.call(ctx, http.MethodGet, "/templates/"+id, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteTemplate deletes a template by ID or name (DELETE /templates/{id},
// 204). E2B answers 400 while sandboxes still use it.
func (c *Client) DeleteTemplate(ctx context.Context, templateIDOrName string) error {
	id, err := segment("template ID or name", templateIDOrName)
	if err != nil {
		return err
	}
	err = c.call(ctx, http.MethodDelete, "/templates/"+id, nil, nil, nil)
	return err
}

// UpdateTemplate changes a template by ID or name
// (PATCH /v2/templates/{id}); an empty request changes nothing.
func (c *Client) UpdateTemplate(ctx context.Context, templateIDOrName string, req e2b.TemplateUpdateRequest) (*e2b.TemplateUpdateResponse, error) {
	id, err := segment("template ID or name", templateIDOrName)
	if err != nil {
		return nil, err
	}
	var out e2b.TemplateUpdateResponse
	if err := c.call(ctx, http.MethodPatch, "/v2/templates/"+id, nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetTemplateByAlias resolves "name", "name:tag" or "namespace/name"
// (GET /templates/aliases/{name}). 404: no such template (or tag); 403: it
// exists but belongs to another team.
func (c *Client) GetTemplateByAlias(ctx context.Context, name string) (*e2b.TemplateAliasResponse, error) {
	alias, err := segment("template name", name)
	if err != nil {
		return nil, err
	}
	var out e2b.TemplateAliasResponse
	if err := c.call(ctx, http.MethodGet, "/templates/aliases/"+alias, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AssignTags points tags at the build target names ("name:tag" or
// "name:<buildID>") (POST /templates/tags, 201).
func (c *Client) AssignTags(ctx context.Context, target string, tags []string) (*e2b.AssignedTemplateTags, error) {
	if target == "" {
		return nil, errors.New("tag target is empty")
	}
	var out e2b.AssignedTemplateTags
	req := e2b.AssignTemplateTagsRequest{Target: target, Tags: nonNil(tags)}
	if err := c.call(ctx, http.MethodPost, "/templates/tags", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteTags removes tags from the template name (which carries no tag)
// (DELETE /templates/tags with a JSON body, 204).
func (c *Client) DeleteTags(ctx context.Context, name string, tags []string) error {
	if name == "" {
		return errors.New("template name is empty")
	}
	req := e2b.DeleteTemplateTagsRequest{Name: name, Tags: nonNil(tags)}
	err := c.call(ctx, http.MethodDelete, "/templates/tags", nil, req, nil)
	return err
}

// ListTags lists the tags of a template by ID or name
// (GET /templates/{id}/tags).
func (c *Client) ListTags(ctx context.Context, templateIDOrName string) ([]e2b.TemplateTag, error) {
	id, err := segment("template ID or name", templateIDOrName)
	if err != nil {
		return nil, err
	}
	var out []e2b.TemplateTag
	if err := c.call(ctx, http.MethodGet, "/templates/"+id+"/tags", nil, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// TagResolution is what a sandbox started from "template:tag" runs, as far as E2B's API
// tells: its tag list names a tag's newest assignment whatever its build's status, a
// start takes the newest one whose build is ready (design/e2b-api.md "Names, aliases, tags").
type TagResolution struct {
	// Listed is the tag's newest assignment (BuildID "" when the tag has none) and
	// ListedStatus the status of its build.
	Listed       e2b.TemplateTag
	ListedStatus string
	// BuildID is the build the tag resolves to when the API names it: Listed's, when
	// ready. Otherwise Earlier says whether the tag still resolves, to an earlier ready
	// build no endpoint names.
	BuildID string
	Earlier bool
}

// ResolveTag finds what tag of the template templateID resolves to: the tag list, the
// status of the listed build and, only when that is not ready, whether the tag resolves
// at all: not when the template has no ready build (GET /templates/{id}), else as
// GET /templates/aliases/{id}:{tag} answers. The template's builds come first because
// that lookup drops ":default" from a name and then only checks that the template
// exists. A missing template is IsNotFound.
func (c *Client) ResolveTag(ctx context.Context, templateID, tag string) (*TagResolution, error) {
	tags, err := c.ListTags(ctx, templateID)
	if err != nil {
		return nil, err
	}
	out := &TagResolution{}
	i := slices.IndexFunc(tags, func(t e2b.TemplateTag) bool { return t.Tag == tag })
	if i < 0 {
		return out, nil
	}
	out.Listed = tags[i]
	info, err := c.GetBuildStatus(ctx, templateID, out.Listed.BuildID, math.MaxInt32)
	switch {
	case IsBuildGone(err):
		out.ListedStatus = e2b.BuildError // a build E2B no longer has starts no sandbox
	case err != nil:
		return nil, err
	default:
		out.ListedStatus = info.Status
	}
	if out.ListedStatus == e2b.BuildReady {
		out.BuildID = out.Listed.BuildID
		return out, nil
	}
	tpl, err := c.GetTemplate(ctx, templateID)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(tpl.Builds, func(b e2b.TemplateBuild) bool { return b.Status == e2b.BuildReady }) {
		return out, nil // no build serves any tag
	}
	_, err = c.GetTemplateByAlias(ctx, templateID+":"+tag)
	if err != nil && !IsNotFound(err) {
		return nil, err
	}
	out.Earlier = err == nil
	return out, nil
}

// nonNil makes an absent list an empty JSON array: the tag bodies require
// the field.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
