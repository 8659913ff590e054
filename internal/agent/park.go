package agent

// Parking: while recording stays paused, the send slots (and the waits') get their originals
// back, so that a paused program's sends cost what they cost untraced (not even the
// interposer's flag test and jump); resuming binds the interposers again before recording
// starts.

import (
	"sync"
	"time"

	"github.com/msgtrace/msgtrace"
	"github.com/msgtrace/msgtrace/machobind"
)

// ParkAfter is how long recording must stay paused before the send slots are parked: a pause
// shorter than that (a host pausing around each frame, say) never pays for rewriting them.
const ParkAfter = 50 * time.Millisecond

// parking is the state of the send slots' parking; its own lock, so that pausing never waits
// for a flush holding the agent's.
type parking struct {
	mu     sync.Mutex
	hook   *machobind.Hook // the capture's hook, once installed
	paused bool
	timer  *time.Timer
	parks  int   // times parked
	err    error // the last park's or unpark's
}

// setRecording turns recording on or off. Off, the send slots are parked after ParkAfter
// unless recording is turned on before; on, parked slots (those of images loaded while parked
// too) get their interposers back first.
func (a *Agent) setRecording(on bool) {
	p := &a.park
	p.mu.Lock()
	defer p.mu.Unlock()
	if !on {
		msgtrace.SetActive(false)
		p.paused = true
		if p.hook != nil && p.timer == nil && !p.hook.Parked() {
			p.timer = time.AfterFunc(ParkAfter, a.parkNow)
		}
		return
	}
	p.paused = false
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	if p.hook != nil && p.hook.Parked() {
		_, p.err = p.hook.Unpark()
	}
	msgtrace.SetActive(true)
}

// parkNow parks the send slots if recording is still paused.
func (a *Agent) parkNow() {
	p := &a.park
	p.mu.Lock()
	defer p.mu.Unlock()
	p.timer = nil
	if !p.paused || p.hook == nil || p.hook.Parked() {
		return
	}
	_, p.err = p.hook.Park(msgtrace.ParkNames()...)
	if p.hook.Parked() {
		p.parks++
	}
}

// ParkState reports how many send and wait slots hold their originals now (recording paused
// for ParkAfter or longer), how many times pauses parked them, and the last parking error.
func (a *Agent) ParkState() (slots, parks int, err error) {
	p := &a.park
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hook != nil {
		slots = p.hook.ParkedSlots()
	}
	return slots, p.parks, p.err
}

// parkHook gives parking the capture's hook, at install; paused then, the slots are parked
// after ParkAfter.
func (a *Agent) parkHook(h *machobind.Hook, paused bool) {
	a.park.mu.Lock()
	a.park.hook = h
	a.park.mu.Unlock()
	a.setRecording(!paused)
}
