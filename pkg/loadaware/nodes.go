package loadaware

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// ThresholdsAnnotation on a node overrides the profile's usageThresholds for that node, e.g.
// "cpu=70,memory=85"; a resource left out keeps the profile's threshold, 0 turns its check off. A
// malformed value is ignored (the profile's thresholds apply), logged once and reported in an event
// on the node.
const ThresholdsAnnotation = "custom-scheduler.io/loadaware-usage-thresholds"

// reasonBadAnnotation is the reason of the event on a node whose annotation is malformed.
const reasonBadAnnotation = "InvalidLoadAwareThresholds"

// registerNodeHandlers keeps each node's allocatable and thresholds in its slot.
func (pl *LoadAware) registerNodeHandlers(logger klog.Logger) error {
	if pl.handle == nil || pl.handle.SharedInformerFactory() == nil {
		return nil
	}
	_, err := pl.handle.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if node, ok := obj.(*v1.Node); ok {
				pl.onNodeUpsert(logger, node)
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			oldNode, ok1 := oldObj.(*v1.Node)
			node, ok2 := newObj.(*v1.Node)
			if !ok1 || !ok2 {
				return
			}
			// Most node updates are status heartbeats: skip them.
			if oldNode.Annotations[ThresholdsAnnotation] == node.Annotations[ThresholdsAnnotation] &&
				oldNode.Status.Allocatable.Cpu().Equal(*node.Status.Allocatable.Cpu()) &&
				oldNode.Status.Allocatable.Memory().Equal(*node.Status.Allocatable.Memory()) {
				return
			}
			pl.onNodeUpsert(logger, node)
		},
		DeleteFunc: func(obj interface{}) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if node, ok := obj.(*v1.Node); ok {
				pl.forgetBadAnnotation(node.Name)
				pl.store.deleteNode(node.Name)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("adding the LoadAware node event handler: %w", err)
	}
	return nil
}

// onNodeUpsert records a node's allocatable and its thresholds (the profile's, or its annotation's).
func (pl *LoadAware) onNodeUpsert(logger klog.Logger, node *v1.Node) {
	cpu, mem := pl.thresholdCPU, pl.thresholdMemory
	if value, ok := node.Annotations[ThresholdsAnnotation]; ok {
		c, m, err := parseThresholds(value, cpu, mem)
		if err != nil {
			pl.reportBadAnnotation(logger, node, value, err)
		} else {
			pl.forgetBadAnnotation(node.Name)
			cpu, mem = c, m
		}
	} else {
		pl.forgetBadAnnotation(node.Name)
	}
	alloc := node.Status.Allocatable
	i, grew := pl.store.setNode(node.Name, alloc.Cpu().MilliValue(), alloc.Memory().Value(), cpu, mem)
	if grew {
		// The queueing hint may have retried the pods before this handler ran: requeue them here too.
		pl.requeue(logger, []int32{i}, false)
	}
}

// parseThresholds reads "cpu=70,memory=85" (either may be left out, keeping cpu or memory as given).
func parseThresholds(value string, cpu, mem int64) (int64, int64, error) {
	seen := map[string]bool{}
	for _, part := range strings.Split(value, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if !ok || key == "" {
			return 0, 0, fmt.Errorf("%q is not resource=percent", strings.TrimSpace(part))
		}
		if seen[key] {
			return 0, 0, fmt.Errorf("%s is given twice", key)
		}
		seen[key] = true
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil || n < 0 || n > 100 {
			return 0, 0, fmt.Errorf("%s=%q is not a percentage between 0 (off) and 100", key, val)
		}
		switch key {
		case "cpu":
			cpu = n
		case "memory":
			mem = n
		default:
			return 0, 0, fmt.Errorf("unknown resource %q (want cpu or memory)", key)
		}
	}
	return cpu, mem, nil
}

// reportBadAnnotation logs a malformed annotation and records an event on the node, once per value.
func (pl *LoadAware) reportBadAnnotation(logger klog.Logger, node *v1.Node, value string, err error) {
	pl.badMu.Lock()
	seen := pl.badAnnotations[node.Name] == value
	pl.badAnnotations[node.Name] = value
	pl.badMu.Unlock()
	if seen {
		return
	}
	logger.Info("Ignoring a malformed LoadAware threshold annotation; the profile's thresholds apply", "node", klog.KObj(node), "annotation", ThresholdsAnnotation, "value", value, "err", err)
	if pl.handle == nil {
		return
	}
	if rec := pl.handle.EventRecorder(); rec != nil {
		rec.Eventf(node, nil, v1.EventTypeWarning, reasonBadAnnotation, "LoadAware",
			"Annotation %s=%q is ignored: %v; the thresholds of profile %q apply", ThresholdsAnnotation, value, err, pl.profile)
	}
}

func (pl *LoadAware) forgetBadAnnotation(node string) {
	pl.badMu.Lock()
	defer pl.badMu.Unlock()
	delete(pl.badAnnotations, node)
}
