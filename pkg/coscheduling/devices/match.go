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

// matchCacheSize bounds the slices' answers kept (a cache past it starts over): a few per slice for
// each device request shape in use.
const matchCacheSize = 20000

// matchCache keeps, for each version of a slice and each request (its class's version and
// selectors), which of the slice's devices the selectors select. Slices and classes change rarely;
// gang checks ask the same of every node again and again.
type matchCache struct {
	mu      sync.Mutex
	answers map[matchKey][]bool
	// ids are the slices' device IDs, by version.
	ids map[matchKey][]structured.DeviceID
}

// deviceIDs are the IDs of the slice's devices, kept for its version.
func (s *Source) deviceIDs(sl *resourceapi.ResourceSlice) []structured.DeviceID {
	var mc *matchCache
	if s != nil {
		mc = s.matchCache
	}
	key := matchKey{slice: sl.UID, version: sl.ResourceVersion}
	cacheable := mc != nil && sl.UID != "" && sl.ResourceVersion != ""
	if cacheable {
		mc.mu.Lock()
		ids, ok := mc.ids[key]
		mc.mu.Unlock()
		if ok {
			return ids
		}
	}
	ids := make([]structured.DeviceID, len(sl.Spec.Devices))
	for i := range sl.Spec.Devices {
		ids[i] = structured.MakeDeviceID(sl.Spec.Driver, sl.Spec.Pool.Name, sl.Spec.Devices[i].Name)
	}
	if cacheable {
		mc.mu.Lock()
		if mc.ids == nil || len(mc.ids) >= matchCacheSize {
			mc.ids = map[matchKey][]structured.DeviceID{}
		}
		mc.ids[key] = ids
		mc.mu.Unlock()
	}
	return ids
}

type matchKey struct {
	slice   types.UID
	version string
	request string
}

// matches says which of the slice's devices req selects: the selectors of its class, then its own,
// as the allocator evaluates them. ok is false when the allocator must answer: the class is not
// found (the allocator fails), a selector is not CEL, or it fails to compile or to evaluate.
func (s *Source) matches(ctx context.Context, sl *resourceapi.ResourceSlice, req *resourceapi.ExactDeviceRequest) ([]bool, bool) {
	class, err := s.dra.DeviceClasses().Get(req.DeviceClassName)
	if err != nil {
		return nil, false
	}
	selectors := append(append([]resourceapi.DeviceSelector(nil), class.Spec.Selectors...), req.Selectors...)
	var b strings.Builder
	b.WriteString(class.Name + "@" + class.ResourceVersion + "/" + string(class.UID))
	for _, sel := range selectors {
		if sel.CEL == nil {
			return nil, false
		}
		b.WriteString("\x00" + sel.CEL.Expression)
	}
	key := matchKey{slice: sl.UID, version: sl.ResourceVersion, request: b.String()}
	mc := s.matchCache
	cacheable := mc != nil && sl.UID != "" && sl.ResourceVersion != ""
	if cacheable {
		mc.mu.Lock()
		answer, ok := mc.answers[key]
		mc.mu.Unlock()
		if ok {
			return answer, true
		}
	}
	exprs := make([]cel.CompilationResult, len(selectors))
	for i, sel := range selectors {
		exprs[i] = s.cel.GetOrCompile(sel.CEL.Expression)
		if exprs[i].Error != nil {
			return nil, false
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	answer := make([]bool, len(sl.Spec.Devices))
	for i := range sl.Spec.Devices {
		d := &sl.Spec.Devices[i]
		answer[i] = true
		for _, expr := range exprs {
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
	if cacheable {
		mc.mu.Lock()
		if mc.answers == nil || len(mc.answers) >= matchCacheSize {
			mc.answers = map[matchKey][]bool{}
		}
		mc.answers[key] = answer
		mc.mu.Unlock()
	}
	return answer, true
}
