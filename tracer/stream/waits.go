package stream

import "strconv"

// FlagWait marks a call that is a contended wait (the recorder's waits.c): a slice named
// "wait PRIMITIVE" nested under the call that waited, its method id a wait id (WaitID). A
// flag the reader sets, as FlagOpen, not a number of the stream.
const FlagWait = 16

// A wait event's method id, as the reader gives it: bit 63 set, the primitive in bits 56-62,
// the holder's thread id (cut to 24 bits: Linux's largest pid_max is 2^22) in bits 32-55 and
// the low 32 bits of the primitive's address below. Method ids of the stream are far smaller;
// readers that key by id see one id per primitive, holder and lock.
const (
	waitIDBit    = 1 << 63
	waitIDPrim   = 56
	waitIDHolder = 32
)

// WaitID is the method id the reader gives a wait event.
func WaitID(prim WaitPrimitive, addr, holder uint64) uint64 {
	return waitIDBit | uint64(prim&0x7f)<<waitIDPrim | (holder&0xffffff)<<waitIDHolder | addr&0xffffffff
}

// WaitOf reads a wait id: the primitive, the low 32 bits of its address and the holder's thread
// id (0 unknown); ok false for any other id.
func WaitOf(id uint64) (prim WaitPrimitive, addrLow, holder uint64, ok bool) {
	if id&waitIDBit == 0 {
		return 0, 0, 0, false
	}
	return WaitPrimitive(id >> waitIDPrim & 0x7f), id & 0xffffffff, id >> waitIDHolder & 0xffffff, true
}

// String is the function that blocked, as C names it.
func (p WaitPrimitive) String() string {
	switch p {
	case WaitMutexLock:
		return "pthread_mutex_lock"
	case WaitRwlockRdlock:
		return "pthread_rwlock_rdlock"
	case WaitRwlockWrlock:
		return "pthread_rwlock_wrlock"
	case WaitCondWait:
		return "pthread_cond_wait"
	case WaitCondTimedwait:
		return "pthread_cond_timedwait"
	case WaitSemWait:
		return "sem_wait"
	case WaitSemTimedwait:
		return "sem_timedwait"
	case WaitSyncEnter:
		return "objc_sync_enter"
	case WaitUnfairLock:
		return "os_unfair_lock_lock"
	case WaitDispatchSync:
		return "dispatch_sync"
	case WaitDispatchSemaphore:
		return "dispatch_semaphore_wait"
	case WaitDispatchGroup:
		return "dispatch_group_wait"
	}
	return "wait primitive " + strconv.Itoa(int(p))
}

// WaitName is the name a wait's slice has: "wait " and the primitive.
func WaitName(id uint64) string {
	p, _, _, _ := WaitOf(id)
	return "wait " + p.String()
}
