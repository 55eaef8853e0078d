package devices

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
)

// Devices in a reservation (see gangfit.NewReservable and the plugin's reservation). A gang that
// holds a reservation waits for the devices of the nodes its members are nominated to, as it waits
// for their CPU. Upstream's hold (nominated pods count as if they ran, for the Filter plugins of
// pods of their priority or lower) does not cover devices: the DynamicResources plugin has no
// PreFilterExtensions, so it never sees a nominated pod's claims. Two things close that gap here:
// the reservation's plan counts the devices that free as free (Freeing), and a pod that would take
// the devices the held members wait for is kept off their node (KeptOff).

var _ gangfit.FreeingDevices = &Source{}

// Freeing implements gangfit.FreeingDevices: a source like s whose checks count as free the devices
// of the claims reserved for leaving pods only (the pods a reservation's plan counts as leaving).
func (s *Source) Freeing(leaving sets.Set[types.UID]) gangfit.DeviceSource {
	if s == nil {
		return nil
	}
	c := *s
	c.freed = leaving
	return &c
}

// freedState is state less the devices of the claims whose consumers are all in freed (see without:
// each dedicated device, shared allocation and consumed capacity they alone hold is released). A
// claim reserved for nobody (allocated, not in use yet) keeps its devices.
func freedState(state *structured.AllocatedState, claims []*resourceapi.ResourceClaim, freed sets.Set[types.UID], consumable bool) *structured.AllocatedState {
	var gone []*resourceapi.ResourceClaim
	for _, claim := range claims {
		if claim.Status.Allocation != nil && onlyFor(claim, freed) {
			gone = append(gone, claim)
		}
	}
	out := without(*state, gone, claims, consumable)
	return &out
}

// onlyFor reports whether a claim is reserved for pods, all of them in pods. A claim reserved for a
// PodGroup is not: it stays allocated while the PodGroup exists (see workload.go).
func onlyFor(claim *resourceapi.ResourceClaim, pods sets.Set[types.UID]) bool {
	if len(claim.Status.ReservedFor) == 0 {
		return false
	}
	for _, ref := range claim.Status.ReservedFor {
		if ref.Resource != "pods" || ref.APIGroup != "" || !pods.Has(ref.UID) {
			return false
		}
	}
	return true
}
