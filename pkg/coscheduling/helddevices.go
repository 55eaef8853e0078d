package coscheduling

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/devices"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/effects"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gang"
)

// The devices held for reservations and nominations (the rule: gang.HeldDevices): who waits where, per
// priority and group, once per change of the reservations (heldVersion) or the nominations
// (claims.Version); the pods kept off, brought back when a reservation ends or a nomination is dropped.

// mayBeKeptOff reports, in two atomic loads and a look at the pod, whether a pod may be kept off held
// devices at all: the scheduler models devices, some gang holds a reservation or some pod is
// nominated, and the pod may claim devices.
func (pl *Coscheduling) mayBeKeptOff(pod *v1.Pod) bool {
	return pl.dra != nil && (pl.reserved.Load() > 0 || pl.claims.Len() > 0) && devices.MayClaim(pod)
}

// heldDevices are the held devices against pods of priority prio and group own (see
// gang.HeldDevicesAgainst), kept while the reservations and nominations do not change.
func (pl *Coscheduling) heldDevices(prio int32, own string) gang.HeldDevices {
	return pl.held.Of([2]uint64{pl.heldVersion.Load(), pl.claims.Version()}, prio, own, func() gang.HeldDevices {
		var held []gang.HeldRoom
		if pl.reserved.Load() > 0 {
			pl.mu.RLock()
			held = gang.HeldAgainst(pl.gangs.All(), prio, own)
			pl.mu.RUnlock()
		}
		return gang.HeldDevicesAgainst(held, pl.members.InGroup, pl.claims.Against(prio, own), devices.MayClaim)
	})
}

// activateKeptOff brings back the pods kept off held devices (a reservation ended: the devices may be
// theirs now).
func (pl *Coscheduling) activateKeptOff(logger klog.Logger) {
	effects.Activate(logger, pl.handle, pl.keptOff.Take()...)
}
