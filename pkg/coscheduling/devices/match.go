package devices

import (
	"context"
	"strings"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// matchCacheSize bounds the answers kept per kind (a cache past it starts over): a few per slice for
// each device request shape in use.
const matchCacheSize = 20000

// matchCache keeps, for each version of a slice and each request (its class's version and
// selectors), which of the slice's devices the selectors select, and each slice version's device
// IDs. Slices and classes change rarely; gang checks ask the same of every node again and again.
type matchCache struct {
	answers versioned[[]bool]
	ids     versioned[[]structured.DeviceID]
}

type matchKey struct {
	slice   types.UID
	version string
	request string
}

// versioned is a bounded map of answers by slice version, safe for concurrent use; a nil one keeps
// nothing.
type versioned[T any] struct {
	mu sync.Mutex
	m  map[matchKey]T
}

// get returns the answer kept for key, if any. Keys of slices not read from the API (no UID or
// version) are never kept.
func (v *versioned[T]) get(key matchKey) (T, bool) {
	var zero T
	if v == nil || key.slice == "" || key.version == "" {
		return zero, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	a, ok := v.m[key]
	return a, ok
}

func (v *versioned[T]) put(key matchKey, a T) {
	if v == nil || key.slice == "" || key.version == "" {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil || len(v.m) >= matchCacheSize {
		v.m = map[matchKey]T{}
	}
	v.m[key] = a
}

// caches returns the source's caches (nil ones, which keep nothing, without a cache).
func (s *Source) caches() (*versioned[[]bool], *versioned[[]structured.DeviceID]) {
	if s == nil || s.matchCache == nil {
		return nil, nil
	}
	return &s.matchCache.answers, &s.matchCache.ids
}

// deviceIDs are the IDs of the slice's devices, kept for its version.
func (s *Source) deviceIDs(sl *resourceapi.ResourceSlice) []structured.DeviceID {
	_, cache := s.caches()
	key := matchKey{slice: sl.UID, version: sl.ResourceVersion}
	if ids, ok := cache.get(key); ok {
		return ids
	}
	ids := make([]structured.DeviceID, len(sl.Spec.Devices))
	for i := range sl.Spec.Devices {
		ids[i] = structured.MakeDeviceID(sl.Spec.Driver, sl.Spec.Pool.Name, sl.Spec.Devices[i].Name)
	}
	cache.put(key, ids)
	return ids
}

// plainRequest is a request resolved once per check for plainCount: its count, its class's and its
// own CEL selectors compiled, and the cache key they make.
type plainRequest struct {
	count int64
	key   string
	exprs []cel.CompilationResult
}

// resolve reads req's class and compiles its selectors (the class's, then its own, as the allocator
// evaluates them). ok is false when the allocator must answer: the class is not found (the allocator
// fails), or a selector is not CEL or does not compile.
func (s *Source) resolve(req *resourceapi.ExactDeviceRequest) (*plainRequest, bool) {
	class, err := s.dra.DeviceClasses().Get(req.DeviceClassName)
	if err != nil {
		return nil, false
	}
	selectors := append(append([]resourceapi.DeviceSelector(nil), class.Spec.Selectors...), req.Selectors...)
	pr := &plainRequest{count: max(req.Count, 1), exprs: make([]cel.CompilationResult, len(selectors))}
	var b strings.Builder
	b.WriteString(class.Name + "@" + class.ResourceVersion + "/" + string(class.UID))
	for i, sel := range selectors {
		if sel.CEL == nil {
			return nil, false
		}
		b.WriteString("\x00" + sel.CEL.Expression)
		if pr.exprs[i] = s.cel.GetOrCompile(sel.CEL.Expression); pr.exprs[i].Error != nil {
			return nil, false
		}
	}
	pr.key = b.String()
	return pr, true
}

// matches says which of the slice's devices the request selects, kept per slice version and request
// key. ok is false when a selector fails to evaluate (the allocator must answer).
func (s *Source) matches(ctx context.Context, sl *resourceapi.ResourceSlice, pr *plainRequest) ([]bool, bool) {
	cache, _ := s.caches()
	key := matchKey{slice: sl.UID, version: sl.ResourceVersion, request: pr.key}
	if answer, ok := cache.get(key); ok {
		return answer, true
	}
	if ctx == nil {
		ctx = context.Background()
	}
	answer := make([]bool, len(sl.Spec.Devices))
	for i := range sl.Spec.Devices {
		d := &sl.Spec.Devices[i]
		answer[i] = true
		for _, expr := range pr.exprs {
			ok, _, err := expr.DeviceMatches(ctx, cel.Device{Driver: sl.Spec.Driver, AllowMultipleAllocations: d.AllowMultipleAllocations, Attributes: d.Attributes, Capacity: d.Capacity})
			if err != nil {
				return nil, false
			}
			if !ok {
				answer[i] = false
				break
			}
		}
	}
	cache.put(key, answer)
	return answer, true
}
