package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// --gpus: devices through Dynamic Resource Allocation (resource.k8s.io/v1). No kubelet and no DRA
// driver runs here, so the playground publishes the devices itself, as a node-local driver does: one
// ResourceSlice per node, in a pool named after the node, with gpusPerNode GPUs. The DeviceClasses
// and the GPU gangs come from examples/gpus, applied after the other workloads.
const (
	gpuDriver      = "gpu.example.com"
	gpusPerNode    = 8
	gpuExamples    = "examples/gpus"
	gpuExtended    = "gpu-extended.example.com" // the DeviceClass with extendedResourceName
	gpuExtResource = "example.com/gpu"
)

// gpuGangs are the GPU gangs of examples/gpus that fit (gpu-too-big does not).
var gpuGangs = []string{"gpu-train", "gpu-finetune"}

// checkDRAServed fails unless the apiserver serves resource.k8s.io/v1 (GA since 1.34; a cluster can
// still turn it off with --runtime-config).
func checkDRAServed(clientset kubernetes.Interface) error {
	list, err := clientset.Discovery().ServerResourcesForGroupVersion(resourcev1.SchemeGroupVersion.String())
	if err != nil {
		return fmt.Errorf("--gpus: the apiserver does not serve %s: %w", resourcev1.SchemeGroupVersion, err)
	}
	for _, want := range []string{"resourceslices", "deviceclasses", "resourceclaims", "resourceclaimtemplates"} {
		found := false
		for _, r := range list.APIResources {
			found = found || r.Name == want
		}
		if !found {
			return fmt.Errorf("--gpus: the apiserver serves %s without %s", resourcev1.SchemeGroupVersion, want)
		}
	}
	return nil
}

// gpuSlice is the ResourceSlice the driver gpu.example.com would publish for node: gpusPerNode GPUs
// with a model, an index and 80Gi of memory each.
func gpuSlice(node string) *resourcev1.ResourceSlice {
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + gpuDriver},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   gpuDriver,
			Pool:     resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
		},
	}
	for i := range gpusPerNode {
		slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"model": {StringValue: ptr.To("example-gpu-80g")},
				"index": {IntValue: ptr.To(int64(i))},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
				"memory": {Value: resource.MustParse("80Gi")},
			},
		})
	}
	return slice
}

// publishGPUs publishes each node's ResourceSlice, as the driver would once its kubelet plugin runs.
func publishGPUs(ctx context.Context, clientset kubernetes.Interface, nodes []string) error {
	for _, node := range nodes {
		if _, err := clientset.ResourceV1().ResourceSlices().Create(ctx, gpuSlice(node), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("publishing the GPUs of %s: %w", node, err)
		}
	}
	return nil
}

// checkExtendedResourceServed fails unless the apiserver kept the DeviceClass's extendedResourceName
// (an apiserver without DRAExtendedResource drops the field, and pods asking example.com/gpu would
// then wait for a device plugin that never comes).
func checkExtendedResourceServed(ctx context.Context, clientset kubernetes.Interface) error {
	dc, err := clientset.ResourceV1().DeviceClasses().Get(ctx, gpuExtended, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("--gpus: DeviceClass %s from %s: %w", gpuExtended, gpuExamples, err)
	}
	if ptr.Deref(dc.Spec.ExtendedResourceName, "") != gpuExtResource {
		return fmt.Errorf("--gpus: the apiserver dropped DeviceClass %s's spec.extendedResourceName (DRAExtendedResource is off)", gpuExtended)
	}
	return nil
}

// podDevices maps namespace/pod to the devices allocated to the claims reserved for it
// ("kwok-node-1/gpu-3"), read from the ResourceClaims' status.
func podDevices(ctx context.Context, clientset kubernetes.Interface) map[string][]string {
	claims, err := clientset.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	out := map[string][]string{}
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			continue
		}
		var devices []string
		for _, r := range c.Status.Allocation.Devices.Results {
			devices = append(devices, r.Pool+"/"+r.Device)
		}
		for _, ref := range c.Status.ReservedFor {
			if ref.Resource == "pods" {
				key := c.Namespace + "/" + ref.Name
				out[key] = append(out[key], devices...)
			}
		}
	}
	for k := range out {
		sort.Strings(out[k])
	}
	return out
}

// deviceNote is the placement table's note for a pod with allocated devices.
func deviceNote(devices []string) string {
	if len(devices) == 0 {
		return ""
	}
	return "devices: " + strings.Join(devices, ",")
}
