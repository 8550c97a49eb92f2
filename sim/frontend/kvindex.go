package frontend

import (
	"container/list"
	"time"
)

// kvIndex is the KV router's prediction of one engine's prefix cache, from its own routing
// decisions (Dynamo's router without KV events): a block routed to the engine is taken as
// cached there until ttl after it was last routed, and at most max blocks are kept (the
// least recently routed go first). Not safe for concurrent use (the frontend's lock guards
// it).
type kvIndex struct {
	ttl   time.Duration
	max   int
	order *list.List               // of *kvBlock, least recently routed first
	index map[uint64]*list.Element // hash → element
}

type kvBlock struct {
	hash uint64
	at   time.Time
}

func newKVIndex(ttl time.Duration, max int) *kvIndex {
	return &kvIndex{ttl: ttl, max: max, order: list.New(), index: map[uint64]*list.Element{}}
}

// match is the number of leading hashes predicted cached at now.
func (x *kvIndex) match(hashes []uint64, now time.Time) int {
	x.expire(now)
	for i, h := range hashes {
		if _, ok := x.index[h]; !ok {
			return i
		}
	}
	return len(hashes)
}

// add records hashes as routed at now and returns those it did not hold (nil: none).
func (x *kvIndex) add(hashes []uint64, now time.Time) []uint64 {
	var added []uint64
	for _, h := range hashes {
		if el, ok := x.index[h]; ok {
			el.Value.(*kvBlock).at = now
			x.order.MoveToBack(el)
			continue
		}
		x.index[h] = x.order.PushBack(&kvBlock{hash: h, at: now})
		added = append(added, h)
	}
	for x.order.Len() > x.max {
		x.drop(x.order.Front())
	}
	return added
}

// remove takes hashes out of the index (a request the engine did not accept).
func (x *kvIndex) remove(hashes []uint64) {
	for _, h := range hashes {
		if el, ok := x.index[h]; ok {
			x.drop(el)
		}
	}
}

// expire drops the blocks last routed more than ttl before now.
func (x *kvIndex) expire(now time.Time) {
	for el := x.order.Front(); el != nil && now.Sub(el.Value.(*kvBlock).at) > x.ttl; el = x.order.Front() {
		x.drop(el)
	}
}

func (x *kvIndex) drop(el *list.Element) {
	delete(x.index, el.Value.(*kvBlock).hash)
	x.order.Remove(el)
}
