// Package e2b is E2B's control-plane vocabulary: the JSON bodies of its API
// and its name grammar. Both ends of the wire import it, the client
// (e2bapi) and the local server, so that neither depends on the other and
// every body has one definition.
package e2b

import (
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
)

// The JSON bodies of the E2B control-plane API (design/e2b-api.md "Template build flow", "Names, aliases, tags", "Sandbox lifecycle to run one command"). The
// client and the local server both use these, so one definition of every body
// serves both ends of the wire. Optional fields are pointers or omitempty so
// that what is not set is not sent: E2B applies its own defaults to absent
// fields (an explicit 0 is not the same request).

// Error is the {code, message} envelope every API error carries.
type Error struct {
	Code      int    `json:"code"`
	Message   string `json:"message"`
	ErrorCode string `json:"error_code,omitempty"`
}

// TemplateBuildRequestV3 is the body of POST /v3/templates.
type TemplateBuildRequestV3 struct {
	Name          string   `json:"name,omitempty"`
	Tags          []string `json:"tags,omitempty"`
	Alias         string   `json:"alias,omitempty"`
	CPUCount      *int32   `json:"cpuCount,omitempty"`
	MemoryMB      *int32   `json:"memoryMB,omitempty"`
	MinFreeDiskMB *int32   `json:"minFreeDiskMb,omitempty"`
}

// TemplateRequestResponseV3 is the 202 answer of POST /v3/templates.
type TemplateRequestResponseV3 struct {
	TemplateID string   `json:"templateID"`
	BuildID    string   `json:"buildID"`
	Public     bool     `json:"public"`
	Names      []string `json:"names"`
	Tags       []string `json:"tags"`
	Aliases    []string `json:"aliases"`
}

// TemplateBuildFileUpload is the 201 answer of GET /templates/{id}/files/{hash}.
type TemplateBuildFileUpload struct {
	Present bool   `json:"present"`
	URL     string `json:"url,omitempty"`
	// Headers must be sent with the upload PUT (newer than the OpenAPI snapshot).
	Headers map[string]string `json:"headers,omitempty"`
}

// TemplateStep is one build step; its vocabulary and argument layout are
// package steps'.
type TemplateStep = steps.Step

// FromImageRegistry holds private registry credentials; Type is "registry",
// "aws" or "gcp" and selects which other fields apply.
type FromImageRegistry struct {
	Type               string `json:"type"`
	Username           string `json:"username,omitempty"`
	Password           string `json:"password,omitempty"`
	AWSAccessKeyID     string `json:"awsAccessKeyId,omitempty"`
	AWSSecretAccessKey string `json:"awsSecretAccessKey,omitempty"`
	AWSRegion          string `json:"awsRegion,omitempty"`
	ServiceAccountJSON string `json:"serviceAccountJson,omitempty"`
}

// TemplateBuildStartV2 is the body of POST /v2/templates/{id}/builds/{buildID}.
type TemplateBuildStartV2 struct {
	FromImage         string             `json:"fromImage,omitempty"`
	FromTemplate      string             `json:"fromTemplate,omitempty"`
	FromImageRegistry *FromImageRegistry `json:"fromImageRegistry,omitempty"`
	Force             bool               `json:"force"`
	Steps             []TemplateStep     `json:"steps"`
	StartCmd          string             `json:"startCmd,omitempty"`
	ReadyCmd          string             `json:"readyCmd,omitempty"`
}

// Build statuses.
const (
	BuildWaiting  = "waiting"
	BuildBuilding = "building"
	BuildReady    = "ready"
	BuildError    = "error"
)

// Log levels, lowest first.
const (
	LogDebug = "debug"
	LogInfo  = "info"
	LogWarn  = "warn"
	LogError = "error"
)

// BuildLogEntry is one structured build log line. Step is "base", "1".."N"
// (1-based into the steps) or "finalize".
type BuildLogEntry struct {
	Timestamp time.Time `json:"timestamp"`
	Message   string    `json:"message"`
	Level     string    `json:"level"`
	Step      string    `json:"step,omitempty"`
}

// BuildStatusReason explains an error status.
type BuildStatusReason struct {
	Message    string          `json:"message"`
	Step       string          `json:"step,omitempty"`
	LogEntries []BuildLogEntry `json:"logEntries,omitempty"`
}

// TemplateBuildInfo is the answer of GET .../builds/{buildID}/status.
type TemplateBuildInfo struct {
	TemplateID string             `json:"templateID"`
	BuildID    string             `json:"buildID"`
	Status     string             `json:"status"`
	Logs       []string           `json:"logs"`
	LogEntries []BuildLogEntry    `json:"logEntries"`
	Reason     *BuildStatusReason `json:"reason,omitempty"`
}

// TemplateBuildLogsResponse is the answer of GET .../builds/{buildID}/logs.
type TemplateBuildLogsResponse struct {
	Logs []BuildLogEntry `json:"logs"`
}

// TeamUser identifies who created a template.
type TeamUser struct {
	ID    string `json:"id"`
	Email string `json:"email"`
}

// Template is an item of GET /v2/templates and GET /templates.
type Template struct {
	TemplateID    string     `json:"templateID"`
	BuildID       string     `json:"buildID"`
	CPUCount      int32      `json:"cpuCount"`
	MemoryMB      int32      `json:"memoryMB"`
	DiskSizeMB    int32      `json:"diskSizeMB"`
	Public        bool       `json:"public"`
	Aliases       []string   `json:"aliases"`
	Names         []string   `json:"names"`
	CreatedAt     time.Time  `json:"createdAt"`
	UpdatedAt     time.Time  `json:"updatedAt"`
	CreatedBy     *TeamUser  `json:"createdBy"`
	LastSpawnedAt *time.Time `json:"lastSpawnedAt"`
	SpawnCount    int64      `json:"spawnCount"`
	BuildCount    int32      `json:"buildCount"`
	EnvdVersion   string     `json:"envdVersion"`
	BuildStatus   string     `json:"buildStatus"`
}

// TemplateBuild is one build inside TemplateWithBuilds.
type TemplateBuild struct {
	BuildID     string     `json:"buildID"`
	Status      string     `json:"status"`
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
	FinishedAt  *time.Time `json:"finishedAt,omitempty"`
	CPUCount    int32      `json:"cpuCount"`
	MemoryMB    int32      `json:"memoryMB"`
	DiskSizeMB  *int32     `json:"diskSizeMB,omitempty"`
	EnvdVersion string     `json:"envdVersion,omitempty"`
}

// TemplateWithBuilds is the answer of GET /templates/{templateID}.
type TemplateWithBuilds struct {
	TemplateID    string          `json:"templateID"`
	Public        bool            `json:"public"`
	Aliases       []string        `json:"aliases"`
	Names         []string        `json:"names"`
	CreatedAt     time.Time       `json:"createdAt"`
	UpdatedAt     time.Time       `json:"updatedAt"`
	LastSpawnedAt *time.Time      `json:"lastSpawnedAt"`
	SpawnCount    int64           `json:"spawnCount"`
	Builds        []TemplateBuild `json:"builds"`
}

// TemplateUpdateRequest is the body of PATCH /v2/templates/{id-or-name}.
type TemplateUpdateRequest struct {
	Public *bool `json:"public,omitempty"`
}

// TemplateUpdateResponse is the answer of PATCH /v2/templates/{id-or-name}.
type TemplateUpdateResponse struct {
	Names []string `json:"names"`
}

// TemplateAliasResponse is the answer of GET /templates/aliases/{alias}.
type TemplateAliasResponse struct {
	TemplateID string `json:"templateID"`
	Public     bool   `json:"public"`
}

// AssignTemplateTagsRequest is the body of POST /templates/tags: Target is
// "name:tag" or "name:<buildID>".
type AssignTemplateTagsRequest struct {
	Target string   `json:"target"`
	Tags   []string `json:"tags"`
}

// AssignedTemplateTags is the 201 answer of POST /templates/tags.
type AssignedTemplateTags struct {
	Tags    []string `json:"tags"`
	BuildID string   `json:"buildID"`
}

// DeleteTemplateTagsRequest is the body of DELETE /templates/tags.
type DeleteTemplateTagsRequest struct {
	Name string   `json:"name"`
	Tags []string `json:"tags"`
}

// TemplateTag is an item of GET /templates/{templateID}/tags.
type TemplateTag struct {
	Tag       string    `json:"tag"`
	BuildID   string    `json:"buildID"`
	CreatedAt time.Time `json:"createdAt"`
}

// NewSandbox is the body of POST /v2/sandboxes and POST /sandboxes. Secure
// exists only on the v1 endpoint (v2 sandboxes are always secured).
type NewSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int32            `json:"timeout,omitempty"`
	Secure              *bool             `json:"secure,omitempty"`
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
	// AutoPause pauses the sandbox at its end instead of killing it (the
	// SDK's lifecycle onTimeout "pause").
	AutoPause       *bool              `json:"autoPause,omitempty"`
	AutoPauseMemory *bool              `json:"autoPauseMemory,omitempty"`
	AutoResume      *SandboxAutoResume `json:"autoResume,omitempty"`
}

// SandboxAutoResume is NewSandbox's autoResume: whether traffic to a paused
// sandbox resumes it.
type SandboxAutoResume struct {
	Enabled bool `json:"enabled"`
}

// SandboxLifecycle is what a sandbox does at its end: OnTimeout is "kill"
// or "pause".
type SandboxLifecycle struct {
	AutoResume bool   `json:"autoResume"`
	OnTimeout  string `json:"onTimeout"`
}

// Sandbox is the 201 answer of sandbox creation.
type Sandbox struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken,omitempty"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// SandboxDetail is the answer of GET /sandboxes/{sandboxID}.
type SandboxDetail struct {
	TemplateID      string            `json:"templateID"`
	Alias           string            `json:"alias,omitempty"`
	SandboxID       string            `json:"sandboxID"`
	ClientID        string            `json:"clientID"`
	StartedAt       time.Time         `json:"startedAt"`
	EndAt           time.Time         `json:"endAt"`
	EnvdVersion     string            `json:"envdVersion"`
	EnvdAccessToken string            `json:"envdAccessToken,omitempty"`
	Domain          *string           `json:"domain"`
	CPUCount        int32             `json:"cpuCount"`
	MemoryMB        int32             `json:"memoryMB"`
	DiskSizeMB      int32             `json:"diskSizeMB"`
	Metadata        map[string]string `json:"metadata,omitempty"`
	State           string            `json:"state"`
	Lifecycle       *SandboxLifecycle `json:"lifecycle,omitempty"`
}

// ListedSandbox is an item of GET /sandboxes.
type ListedSandbox struct {
	TemplateID  string            `json:"templateID"`
	Alias       string            `json:"alias,omitempty"`
	SandboxID   string            `json:"sandboxID"`
	ClientID    string            `json:"clientID"`
	StartedAt   time.Time         `json:"startedAt"`
	EndAt       time.Time         `json:"endAt"`
	CPUCount    int32             `json:"cpuCount"`
	MemoryMB    int32             `json:"memoryMB"`
	DiskSizeMB  int32             `json:"diskSizeMB"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	State       string            `json:"state"`
	EnvdVersion string            `json:"envdVersion"`
}

// SandboxTimeoutRequest is the body of POST /sandboxes/{sandboxID}/timeout.
type SandboxTimeoutRequest struct {
	Timeout int32 `json:"timeout"`
}

// ConnectSandbox is the body of POST /v2/sandboxes/{sandboxID}/connect, where it is
// optional (timeout 300 by default), and of POST /sandboxes/{sandboxID}/connect, where
// timeout is required (design/e2b-api.md "Other lifecycle calls").
type ConnectSandbox struct {
	Timeout *int32 `json:"timeout,omitempty"`
	Memory  *bool  `json:"memory,omitempty"`
}

// SandboxPauseRequest is the optional body of POST /sandboxes/{sandboxID}/pause.
type SandboxPauseRequest struct {
	Memory *bool `json:"memory,omitempty"`
}

// ResumedSandbox is the optional body of the deprecated POST
// /sandboxes/{sandboxID}/resume (timeout 15 s by default).
type ResumedSandbox struct {
	Timeout   *int32 `json:"timeout,omitempty"`
	AutoPause *bool  `json:"autoPause,omitempty"`
	Memory    *bool  `json:"memory,omitempty"`
}

// SandboxMetric is an item of GET /sandboxes/{sandboxID}/metrics.
type SandboxMetric struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	CPUCount      int32     `json:"cpuCount"`
	CPUUsedPct    float32   `json:"cpuUsedPct"`
	MemUsed       int64     `json:"memUsed"`
	MemTotal      int64     `json:"memTotal"`
	MemCache      int64     `json:"memCache"`
	DiskUsed      int64     `json:"diskUsed"`
	DiskTotal     int64     `json:"diskTotal"`
}

// SandboxLog is a raw log line of the v1 logs: Line is a flat JSON object
// with at least "level" (what the CLI's `sandbox logs` parses).
type SandboxLog struct {
	Timestamp time.Time `json:"timestamp"`
	Line      string    `json:"line"`
}

// SandboxLogEntry is a structured sandbox log line.
type SandboxLogEntry struct {
	Timestamp time.Time         `json:"timestamp"`
	Message   string            `json:"message"`
	Level     string            `json:"level"`
	Fields    map[string]string `json:"fields"`
}

// SandboxLogs is the answer of the deprecated GET /sandboxes/{sandboxID}/logs.
type SandboxLogs struct {
	Logs       []SandboxLog      `json:"logs"`
	LogEntries []SandboxLogEntry `json:"logEntries"`
}

// SandboxLogsV2Response is the answer of GET /v2/sandboxes/{sandboxID}/logs.
type SandboxLogsV2Response struct {
	Logs []SandboxLogEntry `json:"logs"`
}

// SandboxSnapshotRequest is the body of POST /sandboxes/{sandboxID}/snapshots.
type SandboxSnapshotRequest struct {
	Name *string `json:"name,omitempty"`
}

// SnapshotInfo is the answer of a snapshot's creation and an item of GET
// /snapshots: SnapshotID is "<name>:<tag>" ("<templateID>:<tag>" without a
// name), Names the template's full names.
type SnapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

// SandboxRefreshRequest is the body of POST /sandboxes/{sandboxID}/refreshes.
type SandboxRefreshRequest struct {
	Duration *int32 `json:"duration,omitempty"`
}

// ClientID is the constant, deprecated clientID every sandbox reports.
const ClientID = "6532622b"
