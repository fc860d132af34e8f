package natsqueue

// lastN maps the last bound keys added (oldest first in order) to their values; adding beyond
// the bound forgets the oldest. It backs a partition's memory of the sequences it committed and of
// the IDs it accepted. The zero value holds nothing and forgets everything it is given.
type lastN[K comparable, V any] struct {
	m     map[K]V
	order []K
	bound int
}

func newLastN[K comparable, V any](bound int) lastN[K, V] {
	return lastN[K, V]{m: make(map[K]V, bound), bound: bound}
}

// add records k with v unless k is known already (it keeps its first value and its place).
func (w *lastN[K, V]) add(k K, v V) {
	if _, ok := w.m[k]; ok || w.bound <= 0 {
		return
	}
	if w.m == nil {
		w.m = make(map[K]V, w.bound)
	}
	w.m[k] = v
	w.order = append(w.order, k)
	if len(w.order) > w.bound {
		drop := len(w.order) - w.bound
		for _, old := range w.order[:drop] {
			delete(w.m, old)
		}
		w.order = append(w.order[:0], w.order[drop:]...)
	}
}

func (w *lastN[K, V]) get(k K) (V, bool) {
	v, ok := w.m[k]
	return v, ok
}

func (w *lastN[K, V]) has(k K) bool {
	_, ok := w.m[k]
	return ok
}
