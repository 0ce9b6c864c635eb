package sandboxes

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// The warm pool (design/local-server.md "The warm pool"): started sandbox
// containers kept for the builds sandboxes were recently created from, as
// E2B keeps snapshots ready, so that a create only initialises envd
// (/init) instead of creating and starting a container and waiting for
// envd.

// PoolConfig bounds the warm pool; PerBuild 0 turns it off.
type PoolConfig struct {
	// PerBuild is how many started containers each build keeps ready while
	// it is recently used.
	PerBuild int
	// Max bounds the pool's containers in all.
	Max int
	// Idle is how long a pooled container waits to be handed out before it
	// is removed, and how long after its last create a build counts as
	// recently used.
	Idle time.Duration
}

// On reports whether the pool keeps anything: every bound above 0.
func (c PoolConfig) On() bool { return c.PerBuild > 0 && c.Max > 0 && c.Idle > 0 }

// Defaults of the server's pool flags.
const (
	DefaultPoolSizePerBuild = 2
	DefaultPoolMax          = 8
	DefaultPoolIdle         = 5 * time.Minute
)

// poolRefillDelay is how long a refill waits before it starts containers:
// the sandbox just handed out runs its first command meanwhile, which a
// container start beside it would slow on a small machine.
const poolRefillDelay = 500 * time.Millisecond

// PoolEndMargin is how long after its idle end a pooled container ends
// itself (its envd's deadline), should the server be gone by then; the
// server removes it first.
const PoolEndMargin = time.Minute

// pooledSandbox is a started container of the pool, under the ID of the
// sandbox it will become.
type pooledSandbox struct {
	id, templateID, buildID string
	started                 engine.Sandbox
	expires                 time.Time
}

// warmPool is the pool: its bookkeeping, and the store's record of every
// container in it (store.Pooled), written before the container is created.
// It runs its refills as tasks of the Manager, which waits for them at
// Close.
type warmPool struct {
	cfg     Config
	catalog Catalog
	records PoolRecords
	engine  Engine
	log     *slog.Logger
	// ctx, tasks and runMu are the Manager's: a refill starts under runMu
	// unless ctx ended, so that Close waits for every refill it did not
	// cancel before it started.
	ctx    context.Context
	tasks  *sync.WaitGroup
	runMu  *sync.Mutex
	starts startSlots

	mu       sync.Mutex
	ready    map[string][]pooledSandbox // by build ID, oldest first
	warming  map[string]int             // containers being started, by build ID
	lastUsed map[string]time.Time       // the last create, by build ID
}

// newWarmPool makes the pool of the Manager m.
func newWarmPool(m *Manager) *warmPool {
	return &warmPool{
		cfg: m.cfg, catalog: m.catalog, records: m.records, engine: m.engine, log: m.log,
		ctx: m.ctx, tasks: &m.tasks, runMu: &m.mu, starts: m.starts,
		ready: map[string][]pooledSandbox{}, warming: map[string]int{}, lastUsed: map[string]time.Time{},
	}
}

// readyCount is the number of pooled containers ready to be handed out.
// Callers hold mu.
func (p *warmPool) readyCount() int {
	n := 0
	for _, list := range p.ready {
		n += len(list)
	}
	return n
}

// size is the number of containers in the pool, started or starting.
// Callers hold mu.
func (p *warmPool) size() int {
	n := p.readyCount()
	for _, w := range p.warming {
		n += w
	}
	return n
}

// takePooled notes a create from the build and hands out its oldest pooled
// container, when it has one.
func (p *warmPool) takePooled(buildID string) (pooledSandbox, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cfg.Pool.On() {
		return pooledSandbox{}, false
	}
	p.lastUsed[buildID] = p.cfg.Now()
	list := p.ready[buildID]
	if len(list) == 0 {
		return pooledSandbox{}, false
	}
	ps := list[0]
	if len(list) == 1 {
		delete(p.ready, buildID)
	} else {
		p.ready[buildID] = list[1:]
	}
	return ps, true
}

// fillPool starts in the background the containers the build lacks, within
// the bounds, one after another.
func (p *warmPool) fillPool(templateID, buildID string) {
	if !p.cfg.Pool.On() {
		return
	}
	p.mu.Lock()
	n := min(p.cfg.Pool.PerBuild-len(p.ready[buildID])-p.warming[buildID], p.cfg.Pool.Max-p.size())
	if n > 0 {
		p.warming[buildID] += n
	}
	p.mu.Unlock()
	if n <= 0 {
		return
	}
	// Under mu, as builds start: Close waits for every task it did not
	// cancel before they started.
	p.runMu.Lock()
	defer p.runMu.Unlock()
	if p.ctx.Err() != nil {
		p.unreserve(buildID, n)
		return
	}
	p.tasks.Go(func() {
		select {
		case <-p.ctx.Done():
		case <-time.After(poolRefillDelay):
		}
		for i := range n {
			if p.ctx.Err() != nil {
				p.unreserve(buildID, n-i)
				return
			}
			p.warmPooled(templateID, buildID)
		}
	})
}

// unreserve gives back n reserved places of a build that will not be
// started.
func (p *warmPool) unreserve(buildID string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.warming[buildID] -= n; p.warming[buildID] <= 0 {
		delete(p.warming, buildID)
	}
}

// warmPooled records, creates and starts one pooled container of a build,
// by the engine's path for every sandbox (engine.Docker.WarmSandbox), with
// the ID, labels, limits and network of the sandbox it will become; and
// adds it to the pool unless its template was deleted meanwhile.
func (p *warmPool) warmPooled(templateID, buildID string) {
	now := p.cfg.Now().UTC()
	ps := pooledSandbox{id: "i" + store.RandomID(20), templateID: templateID, buildID: buildID, expires: now.Add(p.cfg.Pool.Idle)}
	b, err := p.catalog.Build(templateID, buildID)
	if err == nil {
		err = p.records.AddPooled(store.Pooled{ID: ps.id, TemplateID: templateID, BuildID: buildID, CreatedAt: now})
	}
	if err != nil || b.Result == nil {
		p.unreserve(buildID, 1)
		return // the template was deleted meanwhile
	}
	sb := store.Sandbox{
		ID: ps.id, TemplateID: templateID, BuildID: buildID,
		CPUCount: b.CPUCount, MemoryMB: b.MemoryMB, EndAt: ps.expires.Add(PoolEndMargin),
	}
	release, err := p.starts.take(p.ctx)
	var started *engine.Sandbox
	if err == nil {
		started, err = p.engine.WarmSandbox(p.ctx, sandboxSpec(sb, b))
		release()
	}
	if err != nil {
		p.unreserve(buildID, 1)
		p.forgetPooled(ps.id)
		if p.ctx.Err() == nil {
			p.log.Warn("warm pool: start a container", "template", templateID, "build", buildID, "err", err)
		}
		return
	}
	ps.started = *started
	p.mu.Lock()
	if p.warming[buildID]--; p.warming[buildID] <= 0 {
		delete(p.warming, buildID)
	}
	// Checked under mu: dropTemplatePool forgets the records before it
	// takes mu.
	kept, err := p.records.IsPooled(ps.id)
	if kept && err == nil {
		p.ready[buildID] = append(p.ready[buildID], ps)
	}
	p.mu.Unlock()
	if !kept || err != nil {
		p.removePooled(p.ctx, ps)
		return
	}
	p.log.Debug("warm pool: container ready", "sandbox", ps.id, "build", buildID, "pooled", p.poolSize())
}

func (p *warmPool) poolSize() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.size()
}

// PoolView is what the warm pool holds at one moment: the sandbox IDs of
// its ready containers by build, oldest first, how many are starting, and
// the builds used recently enough to keep theirs.
type PoolView struct {
	Ready    map[string][]string
	Starting int
	Recent   map[string]bool
}

// view is the pool as it is now.
func (p *warmPool) view() PoolView {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := PoolView{Ready: map[string][]string{}, Recent: map[string]bool{}}
	for buildID, list := range p.ready {
		for _, ps := range list {
			v.Ready[buildID] = append(v.Ready[buildID], ps.id)
		}
	}
	for _, n := range p.warming {
		v.Starting += n
	}
	for buildID := range p.lastUsed {
		v.Recent[buildID] = true
	}
	return v
}

// readyNow is the number of pooled containers ready to be handed out.
func (p *warmPool) readyNow() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.readyCount()
}

// removePooled removes a pooled container and its record; a container
// that could not be removed keeps its record, for the next start's
// clean-up.
func (p *warmPool) removePooled(ctx context.Context, ps pooledSandbox) {
	if err := p.engine.StopSandbox(context.WithoutCancel(ctx), ps.id); err != nil {
		p.log.Error("warm pool: remove a container", "sandbox", ps.id, "err", err)
		return
	}
	p.forgetPooled(ps.id)
}

func (p *warmPool) forgetPooled(ids ...string) {
	if err := p.records.DeletePooled(ids...); err != nil {
		p.log.Error("warm pool: forget containers", "sandboxes", ids, "err", err)
	}
}

// dropPool takes out of the pool the containers drop selects and removes
// them.
func (p *warmPool) dropPool(ctx context.Context, drop func(pooledSandbox) bool) int {
	var gone []pooledSandbox
	p.mu.Lock()
	for buildID, list := range p.ready {
		var keep []pooledSandbox
		for _, ps := range list {
			if drop(ps) {
				gone = append(gone, ps)
			} else {
				keep = append(keep, ps)
			}
		}
		if len(keep) == 0 {
			delete(p.ready, buildID)
		} else {
			p.ready[buildID] = keep
		}
	}
	p.mu.Unlock()
	for _, ps := range gone {
		p.removePooled(ctx, ps)
	}
	return len(gone)
}

// dropTemplate removes the pooled containers of a template whose
// deletion forgot their records (store.Catalog.DeleteTemplate), before its images
// go.
func (p *warmPool) dropTemplate(ctx context.Context, templateID string) {
	if n := p.dropPool(ctx, func(ps pooledSandbox) bool { return ps.templateID == templateID }); n > 0 {
		p.log.Info("warm pool: containers of a deleted template removed", "template", templateID, "count", n)
	}
}

// expirePool removes the pooled containers that waited their idle time
// out, and starts new ones for builds still recently used; builds unused
// for that long are no longer.
func (p *warmPool) expirePool(ctx context.Context) {
	now := p.cfg.Now()
	refill := map[string]string{} // build ID → template ID
	n := p.dropPool(ctx, func(ps pooledSandbox) bool {
		if now.Before(ps.expires) {
			return false
		}
		refill[ps.buildID] = ps.templateID
		return true
	})
	p.mu.Lock()
	for buildID, at := range p.lastUsed {
		if now.Sub(at) >= p.cfg.Pool.Idle {
			delete(p.lastUsed, buildID)
		}
	}
	for buildID := range refill {
		if _, recent := p.lastUsed[buildID]; !recent {
			delete(refill, buildID)
		}
	}
	p.mu.Unlock()
	if n > 0 {
		p.log.Info("warm pool: idle containers removed", "count", n)
	}
	for buildID, templateID := range refill {
		p.fillPool(templateID, buildID)
	}
}

// clearPoolRecords forgets the pooled containers a previous run recorded:
// nothing claims their containers, which the start-up clean-up removes.
func clearPoolRecords(st PoolRecords, log *slog.Logger) error {
	pooled, err := st.PooledSandboxes()
	if err != nil || len(pooled) == 0 {
		return err
	}
	ids := make([]string, len(pooled))
	for i, p := range pooled {
		ids[i] = p.ID
	}
	log.Info("warm pool: containers of the previous run to remove", "count", len(ids))
	return st.DeletePooled(ids...)
}
