package integration

// The soak's devices: a DRA driver stand-in publishes GPUs on some of the soak's nodes (one
// ResourceSlice per node, pool named after the node, as dra_test.go does), two DeviceClasses select
// them (one plain, for ResourceClaims; one with spec.extendedResourceName), and some of the random
// gangs ask one GPU per member: through a ResourceClaimTemplate (the resourceclaim controller of the
// package's kube-controller-manager makes each member's claim and, once the member is gone or
// finished, deallocates and deletes it) or as the DRA-backed extended resource (the scheduler makes
// the claim). The watcher checks, on every snapshot, that no device is allocated to two claims and
// that every live bound member of a device gang has its claim allocated on its node and reserved for
// it.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// How a soak gang's members ask for devices (soakGang.devices).
const (
	soakNoDevices = ""
	// soakClaimDevices: one ResourceClaim per member, from the ResourceClaimTemplate soakClaimTemplate.
	soakClaimDevices = "claim"
	// soakExtendedDevices: one of the DRA-backed extended resource per member.
	soakExtendedDevices = "extended"

	soakClaimTemplate = "gpu"
	// soakPodClaim is the members' name for their claim (spec.resourceClaims[].name).
	soakPodClaim = "gpu"
	// soakRoomDevices: GPUs on each node settle adds (room for every waiting device member).
	soakRoomDevices = 8
)

// soakDevices is the soak's DRA set-up and what the device check has seen.
type soakDevices struct {
	// claims: the plain DeviceClass and the driver (claims from the template ask this class).
	claims draEnv
	// extended: the DeviceClass with extendedResourceName (same driver, same devices).
	extended draEnv
	// perNode are the GPUs each node of the soak publishes (0: none), and its slice.
	perNode map[string]int
	sliceOf map[string]string
	// gangs counts the device gangs created (they ask by claim template and extended resource in turn).
	gangs int

	// reportedDevices, reportedPods: double allocations and members already reported.
	reportedDevices map[string]bool
	reportedPods    map[string]bool
	// boundSeen are the device members seen bound with their claim in order (the check had work),
	// with how they ask (soakClaimDevices, soakExtendedDevices); allocated are the devices seen
	// allocated over the run.
	boundSeen map[string]string
	allocated map[string]bool
}

// setUpDevices creates the soak's two DeviceClasses and its ResourceClaimTemplate, and makes sure the
// resourceclaim controller runs.
func (w *soakWorld) setUpDevices() {
	t := w.t
	needControllerManager(t)
	if !slices.Contains(testControllers, "resourceclaim-controller") {
		t.Fatal("testControllers lacks resourceclaim-controller: no claim would be made from the template")
	}
	claims := newDRAEnv(t, w.ns, false)
	claims.claimTemplate(t, soakClaimTemplate)
	extended := draEnv{ns: w.ns, driver: claims.driver, class: "gpu-ext-" + w.ns + ".example.com", extended: v1.ResourceName(w.ns + ".example.com/gpu")}
	createDeviceClass(t, extended.class, extended.driver, extended.extended)
	w.dev = soakDevices{
		claims: claims, extended: extended,
		perNode: map[string]int{}, sliceOf: map[string]string{},
		reportedDevices: map[string]bool{}, reportedPods: map[string]bool{},
		boundSeen: map[string]string{}, allocated: map[string]bool{},
	}
}

// publishDevices publishes n GPUs on node (none when 0).
func (w *soakWorld) publishDevices(node string, n int) {
	w.dev.perNode[node] = n
	if n > 0 {
		w.dev.sliceOf[node] = w.dev.claims.publish(w.t, node, n)
	}
}

// unpublishDevices deletes a deleted node's ResourceSlice, as its driver (or the garbage collector,
// the slice being owned by the node) would.
func (w *soakWorld) unpublishDevices(node string) {
	slice := w.dev.sliceOf[node]
	delete(w.dev.sliceOf, node)
	delete(w.dev.perNode, node)
	if slice == "" {
		return
	}
	if err := client.ResourceV1().ResourceSlices().Delete(context.Background(), slice, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		w.fatalf("deleting ResourceSlice %s: %v", slice, err)
	}
}

// withDevices makes pod ask one GPU the way its gang does.
func (w *soakWorld) withDevices(pod *v1.Pod, g *soakGang) {
	c := &pod.Spec.Containers[0]
	switch g.devices {
	case soakClaimDevices:
		pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: soakPodClaim, ResourceClaimTemplateName: ptr.To(soakClaimTemplate)}}
		c.Resources.Claims = []v1.ResourceClaim{{Name: soakPodClaim}}
	case soakExtendedDevices:
		one := resource.MustParse("1")
		c.Resources.Requests[w.dev.extended.extended] = one
		if c.Resources.Limits == nil {
			c.Resources.Limits = v1.ResourceList{}
		}
		c.Resources.Limits[w.dev.extended.extended] = one
	}
}

// soakAsksDevice: the pod asks a GPU (a claim of the template, or the extended resource).
func (w *soakWorld) soakAsksDevice(p *v1.Pod) bool {
	if len(p.Spec.ResourceClaims) > 0 {
		return true
	}
	for _, c := range p.Spec.Containers {
		if _, ok := c.Resources.Limits[w.dev.extended.extended]; ok {
			return true
		}
	}
	return false
}

// devicesSummary says what the device check saw, for the logs.
func (w *soakWorld) devicesSummary() string {
	kinds := map[string]int{}
	for _, k := range w.dev.boundSeen {
		kinds[k]++
	}
	return fmt.Sprintf("%d device members seen bound with their claim allocated on their node (%d by claim template, %d by extended resource), %d distinct devices seen allocated; GPUs per node at the end: %s",
		len(w.dev.boundSeen), kinds[soakClaimDevices], kinds[soakExtendedDevices], len(w.dev.allocated), w.gpusPerNode())
}

// gpusPerNode lists the GPUs each node publishes.
func (w *soakWorld) gpusPerNode() string {
	var parts []string
	for n, d := range w.dev.perNode {
		if d > 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", n, d))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// checkDevices checks one snapshot's devices (views are the snapshot's groups, listed before the
// claims): no device is allocated to two claims at once (one list, one resourceVersion: a real double
// allocation), and every live bound member that asks a GPU has its claim allocated on its node (the
// devices of its node's pool) and reserved for it. A member found wanting is checked again from
// fresh reads — the claims first, then the pod, which must still be the same live pod bound to the
// same node: a pod live after the claims were read was live when they were read, and a bound pod's
// claim is allocated before its bind and freed only once the pod is done or deleted — so a
// violation is never the skew between two lists. Callers hold mu.
func (w *soakWorld) checkDevices(ctx context.Context, views map[string]*soakGroupView) {
	claims, err := w.claimsByName(ctx)
	if err != nil {
		if ctx.Err() == nil {
			w.t.Logf("%s watcher: listing ResourceClaims: %v", w.elapsed(), err)
		}
		return
	}
	holders := map[string][]string{}
	for name, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			key := r.Driver + "/" + r.Pool + "/" + r.Device
			holders[key] = append(holders[key], name)
			w.dev.allocated[key] = true
		}
	}
	for dev, names := range holders {
		if len(names) < 2 || w.dev.reportedDevices[dev] {
			continue
		}
		sort.Strings(names)
		w.dev.reportedDevices[dev] = true
		w.violations++
		w.failf("%s VIOLATION: device %s is allocated to %d claims at once: %s (replay with SOAK_SEED=%d)",
			w.elapsed(), dev, len(names), describeClaims(claims, names), w.seed)
	}
	for group, v := range views {
		for i := range v.pods {
			p := &v.pods[i]
			if !soakLive(p) || !ours(p) || p.Spec.NodeName == "" || !w.soakAsksDevice(p) || w.dev.reportedPods[p.Name] {
				continue
			}
			problem := soakClaimProblem(p, claims)
			if problem == "" {
				w.dev.boundSeen[p.Name] = soakClaimDevices
				if len(p.Spec.ResourceClaims) == 0 {
					w.dev.boundSeen[p.Name] = soakExtendedDevices
				}
				continue
			}
			if problem = w.recheckClaim(ctx, p); problem == "" {
				continue
			}
			w.dev.reportedPods[p.Name] = true
			w.violations++
			w.failf("%s VIOLATION: member %s of device gang %s is bound to %s but %s; group %v (replay with SOAK_SEED=%d)",
				w.elapsed(), p.Name, group, p.Spec.NodeName, problem, v, w.seed)
		}
	}
}

// recheckClaim reads the claims, then the pod, again; it returns the pod's claim problem, or "" when
// the pod is gone, another pod, no longer live or not bound where it was, or its claim is fine.
func (w *soakWorld) recheckClaim(ctx context.Context, was *v1.Pod) string {
	claims, err := w.claimsByName(ctx)
	if err != nil {
		return ""
	}
	p, err := client.CoreV1().Pods(w.ns).Get(ctx, was.Name, metav1.GetOptions{})
	if err != nil || p.UID != was.UID || !soakLive(p) || p.Spec.NodeName != was.Spec.NodeName {
		return ""
	}
	return soakClaimProblem(p, claims)
}

func (w *soakWorld) claimsByName(ctx context.Context) (map[string]*resourcev1.ResourceClaim, error) {
	list, err := client.ResourceV1().ResourceClaims(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make(map[string]*resourcev1.ResourceClaim, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

// soakClaimProblem says what is wrong with a bound member's claim ("" when nothing): it must be
// named in the pod's status (by the resourceclaim controller for a claim of a template, by the
// scheduler for the extended resource's), exist, be allocated with devices of the pool of the pod's
// node only (the soak's pools are named after their nodes), and be reserved for the pod.
func soakClaimProblem(p *v1.Pod, claims map[string]*resourcev1.ResourceClaim) string {
	var name string
	if len(p.Spec.ResourceClaims) > 0 {
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.Name == soakPodClaim && s.ResourceClaimName != nil {
				name = *s.ResourceClaimName
			}
		}
		if name == "" {
			return "its status names no ResourceClaim for " + soakPodClaim
		}
	} else {
		if p.Status.ExtendedResourceClaimStatus == nil || p.Status.ExtendedResourceClaimStatus.ResourceClaimName == "" {
			return "its status names no extended-resource claim (status.extendedResourceClaimStatus)"
		}
		name = p.Status.ExtendedResourceClaimStatus.ResourceClaimName
	}
	c := claims[name]
	switch {
	case c == nil:
		return "its claim " + name + " does not exist"
	case c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) == 0:
		return "its claim " + name + " is not allocated"
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Pool != p.Spec.NodeName {
			return fmt.Sprintf("its claim %s holds device %s/%s/%s, not a device of its node", name, r.Driver, r.Pool, r.Device)
		}
	}
	if !slices.ContainsFunc(c.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool { return r.UID == p.UID }) {
		return "its claim " + name + " is allocated on its node but not reserved for it"
	}
	return ""
}

// describeClaims names claims with their consumers, for a report.
func describeClaims(claims map[string]*resourcev1.ResourceClaim, names []string) string {
	var parts []string
	for _, n := range names {
		c := claims[n]
		var users []string
		for _, r := range c.Status.ReservedFor {
			users = append(users, r.Name)
		}
		parts = append(parts, fmt.Sprintf("%s (reserved for %v)", n, users))
	}
	return strings.Join(parts, ", ")
}
