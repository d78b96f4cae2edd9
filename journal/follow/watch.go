package follow

import (
	"fmt"
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// watchers is the process's one inotify instance, shared by every follower:
// the kernel allows 128 instances per user by default, and a worker follows
// one journal per running agent.
var watchers hub

// hub watches the directories of followed journals and wakes the followers
// of a journal on any event that names it. A directory watch, not a file
// watch, because it also sees the journal being created, and one watch
// serves a journal through its whole life.
type hub struct {
	mu   sync.Mutex
	w    *fsnotify.Watcher // nil while nobody follows
	done chan struct{}     // closed when w's dispatch loop has ended
	dirs map[string]int    // watched directory → its followers
	subs map[string][]*watch
}

// watch is one follower's subscription to one journal.
type watch struct {
	h    *hub
	path string
	// wake holds at most one pending wake-up, which covers every event
	// since the follower last read.
	wake chan struct{}
}

// watch starts waking the caller on events naming path, which must be
// absolute, clean and free of symbolic links in its directory, because the
// events name the journal by its directory as watched. Events that come
// after watch returns are never missed.
func (h *hub) watch(path string) (*watch, error) {
	h.mu.Lock()
	if h.w == nil {
		w, err := fsnotify.NewBufferedWatcher(256)
		if err != nil {
			h.mu.Unlock()
			return nil, fmt.Errorf("journal: inotify: %w", err)
		}
		h.w, h.done = w, make(chan struct{})
		h.dirs, h.subs = map[string]int{}, map[string][]*watch{}
		go h.dispatch(w, h.done)
	}
	dir := filepath.Dir(path)
	// Add again even when the directory is watched: it is a no-op then, and
	// renews a watch the kernel dropped when the directory was removed.
	if err := h.w.Add(dir); err != nil {
		h.mu.Unlock()
		h.release()
		return nil, fmt.Errorf("journal: watch %s: %w", dir, err)
	}
	h.dirs[dir]++
	wt := &watch{h: h, path: path, wake: make(chan struct{}, 1)}
	h.subs[path] = append(h.subs[path], wt)
	h.mu.Unlock()
	return wt, nil
}

// close ends the subscription, and the inotify instance with the last one.
func (wt *watch) close() {
	h := wt.h
	h.mu.Lock()
	subs := h.subs[wt.path]
	for i, s := range subs {
		if s == wt {
			subs = append(subs[:i], subs[i+1:]...)
			break
		}
	}
	if len(subs) == 0 {
		delete(h.subs, wt.path)
	} else {
		h.subs[wt.path] = subs
	}
	dir := filepath.Dir(wt.path)
	if h.dirs[dir]--; h.dirs[dir] == 0 {
		delete(h.dirs, dir)
		_ = h.w.Remove(dir) // fails only if the kernel already dropped it with the directory
	}
	h.mu.Unlock()
	h.release()
}

// release closes the inotify instance if nobody follows any more.
func (h *hub) release() {
	h.mu.Lock()
	if h.w == nil || len(h.dirs) > 0 {
		h.mu.Unlock()
		return
	}
	w, done := h.w, h.done
	h.w = nil
	h.mu.Unlock()
	// Outside the lock: the dispatch loop may be waiting for it.
	w.Close()
	<-done
}

// dispatch turns w's events into wake-ups until w is closed.
func (h *hub) dispatch(w *fsnotify.Watcher, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			// Clean makes "//name" of a journal in "/" match; it does not
			// allocate for a clean name.
			h.notify(filepath.Clean(ev.Name))
		case _, ok := <-w.Errors:
			if !ok {
				return
			}
			// An overflow or a failed read lost events: everyone reads again.
			h.notifyAll()
		}
	}
}

func (h *hub) notify(path string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, wt := range h.subs[path] {
		wt.poke()
	}
}

func (h *hub) notifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, subs := range h.subs {
		for _, wt := range subs {
			wt.poke()
		}
	}
}

func (wt *watch) poke() {
	select {
	case wt.wake <- struct{}{}:
	default:
	}
}
