package v1alpha1

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodGroupLabel is the pod label that makes a pod a member of the PodGroup it names (same namespace).
const PodGroupLabel = GroupName + "/pod-group"

// PodGroupPhase is the phase of a pod group at the current time.
type PodGroupPhase string

// The phases of a PodGroup. They are the values scheduler-plugins uses, so tools that read them keep
// working.
const (
	// PodGroupPending means the group is accepted, but fewer than minMember of its pods exist yet or
	// the scheduler cannot place minMember of them.
	PodGroupPending PodGroupPhase = "Pending"
	// PodGroupPreScheduling means minMember pods exist and wait in the scheduling queue.
	PodGroupPreScheduling PodGroupPhase = "PreScheduling"
	// PodGroupScheduling means the scheduler has reserved some members and waits for the rest of the
	// quorum, or some but fewer than minMember members are bound.
	PodGroupScheduling PodGroupPhase = "Scheduling"
	// PodGroupScheduled means at least minMember pods are bound to nodes.
	PodGroupScheduled PodGroupPhase = "Scheduled"
	// PodGroupRunning means at least minMember pods are running (or have succeeded).
	PodGroupRunning PodGroupPhase = "Running"
	// PodGroupFinished means at least minMember pods have succeeded.
	PodGroupFinished PodGroupPhase = "Finished"
	// PodGroupFailed means a member failed and fewer than minMember pods are running or succeeded.
	PodGroupFailed PodGroupPhase = "Failed"
	// PodGroupUnknown means the phase could not be determined.
	PodGroupUnknown PodGroupPhase = "Unknown"
)

// PodGroup is a group of pods that must be scheduled together: no member is bound unless minMember
// members can be placed at once.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName={pg,pgs}
// +kubebuilder:subresource:status
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=https://github.com/kubernetes-sigs/scheduler-plugins/pull/50"
// +kubebuilder:printcolumn:name="Phase",JSONPath=".status.phase",type=string,description="Current phase of the PodGroup."
// +kubebuilder:printcolumn:name="MinMember",JSONPath=".spec.minMember",type=integer,description="The minimal number of members that must be scheduled together."
// +kubebuilder:printcolumn:name="Scheduled",JSONPath=".status.scheduled",type=integer,description="The number of members bound to nodes."
// +kubebuilder:printcolumn:name="Running",JSONPath=".status.running",type=integer,description="The number of actively running pods."
// +kubebuilder:printcolumn:name="Succeeded",JSONPath=".status.succeeded",type=integer,description="The number of pods which reached phase Succeeded."
// +kubebuilder:printcolumn:name="Failed",JSONPath=".status.failed",type=integer,description="The number of pods which reached phase Failed."
// +kubebuilder:printcolumn:name="Reason",JSONPath=".status.conditions[?(@.type==\"Scheduled\")].reason",type=string,priority=1,description="Why the group is or is not scheduled."
// +kubebuilder:printcolumn:name="Timeout",JSONPath=".spec.scheduleTimeoutSeconds",type=integer,priority=1,description="Seconds members wait at Permit for the quorum."
// +kubebuilder:printcolumn:name="Age",JSONPath=".metadata.creationTimestamp",type=date,description="Age is the time PodGroup was created."
type PodGroup struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Specification of the desired behavior of the pod group.
	// +optional
	Spec PodGroupSpec `json:"spec,omitempty"`

	// Status represents the current information about a pod group.
	// This data may not be up to date.
	// +optional
	Status PodGroupStatus `json:"status,omitempty"`
}

// PodGroupSpec represents the template of a pod group.
type PodGroupSpec struct {
	// MinMember is the minimal number of members that must be placed at once; if the cluster cannot
	// place that many, the scheduler binds none of them. The minimum is 1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	// +optional
	MinMember int32 `json:"minMember,omitempty"`

	// MinResources is the minimal total of resources the members need to run; the scheduler does not
	// start the group while the cluster's free resources are below it.
	// +optional
	MinResources v1.ResourceList `json:"minResources,omitempty"`

	// ScheduleTimeoutSeconds is how long reserved members wait for the rest of the quorum before the
	// whole group is rejected and its reservations released. Unset or 0 means the scheduler's
	// default (the Coscheduling plugin's permitWaitingTimeSeconds).
	// +kubebuilder:validation:Minimum=0
	// +optional
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`

	// TopologyPolicy places the whole gang within one domain of a node label (a rack, block or zone):
	// the members of an attempt all go to one domain, chosen so that it fits them tightest.
	// +optional
	TopologyPolicy *TopologyPolicy `json:"topologyPolicy,omitempty"`
}

// TopologyKey is a node label key, e.g. topology.kubernetes.io/zone or example.com/rack.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=317
// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
type TopologyKey string

// TopologyPolicy says in which node-label domains a gang's members must or should be placed
// together. Nodes without a label are in no domain of that key.
type TopologyPolicy struct {
	// Required is a node label key: all members in ONE domain of it (one value of the label), or none
	// placed.
	// +optional
	Required TopologyKey `json:"required,omitempty"`

	// Preferred are node label keys, narrowest first: the gang goes to one domain of the first key
	// where one fits, else of the next, and so on; then (within the required domain if one is set)
	// anywhere.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	Preferred []TopologyKey `json:"preferred,omitempty"`
}

// PodGroupStatus represents the current state of a pod group.
type PodGroupStatus struct {
	// Current phase of PodGroup.
	// +optional
	Phase PodGroupPhase `json:"phase,omitempty"`

	// OccupiedBy marks the workload (e.g., deployment, statefulset) UID that occupy the podgroup.
	// It is empty if not initialized.
	// +optional
	OccupiedBy string `json:"occupiedBy,omitempty"`

	// The number of pods bound to nodes, including those that finished.
	// +optional
	Scheduled int32 `json:"scheduled,omitempty"`

	// Waiting is the number of live members the scheduler has reserved that wait at Permit for the
	// rest of the quorum (not yet bound).
	// +optional
	Waiting int32 `json:"waiting,omitempty"`

	// The number of actively running pods.
	// +optional
	Running int32 `json:"running,omitempty"`

	// The number of pods which reached phase Succeeded.
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`

	// The number of pods which reached phase Failed.
	// +optional
	Failed int32 `json:"failed,omitempty"`

	// ScheduleStartTime is when the scheduler first started placing the group.
	// +optional
	ScheduleStartTime metav1.Time `json:"scheduleStartTime,omitempty"`

	// Conditions say where the group stands. The scheduler maintains the "Scheduled" condition: True
	// with reason QuorumReached while at least minMember live members are bound (or reserved and
	// binding); False with reason WaitingForMembers, WaitingForQuorum, GangInfeasible, GangRejected,
	// GangTimedOut, BelowQuorum or Pending otherwise, and a message with the counts. Its
	// lastTransitionTime changes when its status or reason changes.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// BackoffUntil is when the back-off after the gang's last failed attempt ends (the Scheduled
	// reason is GangRejected or GangTimedOut): its members are tried again then.
	// +optional
	BackoffUntil *metav1.Time `json:"backoffUntil,omitempty"`

	// ReservedUntil is, while the gang holds a reservation (the Reserved condition is True), when the
	// reservation ends at the latest (reservation.timeoutSeconds after it started).
	// +optional
	ReservedUntil *metav1.Time `json:"reservedUntil,omitempty"`

	// Shortfall says in numbers why the scheduler's whole-gang check found that the members still
	// missing from the quorum do not fit the free resources at once (the check that last changed the
	// gang's outcome; a later one with the same message is written with the next status write). It is set while the
	// Scheduled condition's reason is GangInfeasible, whose message says the same in words: tools
	// read these fields, not the message.
	// +optional
	Shortfall *PodGroupShortfall `json:"shortfall,omitempty"`
}

// ShortfallReason names the part of the whole-gang check that failed.
// +kubebuilder:validation:Enum=TooFewMembers;MinResources;NodeRoom;MemberFitsNowhere;TopologyDomain
type ShortfallReason string

// The reasons of a PodGroupShortfall.
const (
	// ShortfallTooFewMembers: fewer unscheduled members exist than the quorum still needs.
	ShortfallTooFewMembers ShortfallReason = "TooFewMembers"
	// ShortfallMinResources: spec.minResources exceed the free resources of the nodes the members may
	// use (Resources says how much).
	ShortfallMinResources ShortfallReason = "MinResources"
	// ShortfallNodeRoom: the nodes' free resources fit only Placeable of the Needed members, node by
	// node (Resources says what is short, in total or on the roomiest node).
	ShortfallNodeRoom ShortfallReason = "NodeRoom"
	// ShortfallMemberFitsNowhere: a member (Resources' Member is its request) fits on no node's free
	// resources.
	ShortfallMemberFitsNowhere ShortfallReason = "MemberFitsNowhere"
	// ShortfallTopologyDomain: no domain of the required topology key holds the members (Domains
	// says how many each fits).
	ShortfallTopologyDomain ShortfallReason = "TopologyDomain"
)

// PodGroupShortfall is what a gang that does not fit is short of.
type PodGroupShortfall struct {
	// Reason names the part of the check that failed.
	Reason ShortfallReason `json:"reason"`

	// Needed is how many more members must be placed at once to reach minMember.
	Needed int32 `json:"needed"`

	// Placeable is how many of them the free resources fit (in the best domain, for
	// TopologyDomain).
	// +optional
	Placeable int32 `json:"placeable,omitempty"`

	// Unscheduled is how many members exist that are neither bound nor reserved.
	// +optional
	Unscheduled int32 `json:"unscheduled,omitempty"`

	// Resources says, for each resource the needed members (or spec.minResources) ask for, how much
	// they ask and how much is free, in total and on the roomiest node.
	// +optional
	// +listType=map
	// +listMapKey=name
	Resources []ResourceShortfall `json:"resources,omitempty"`

	// LargestFreeNode names the node with the most free CPU (then memory) among those the members
	// may use.
	// +optional
	LargestFreeNode string `json:"largestFreeNode,omitempty"`

	// TopologyKey and Domains, for TopologyDomain: how many of the needed members each domain of
	// the required key fits, the roomiest first (at most 16 domains).
	// +optional
	TopologyKey string `json:"topologyKey,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=value
	Domains []DomainShortfall `json:"domains,omitempty"`
}

// ResourceShortfall is what a gang asks of one resource and what the nodes have free: the gang is
// short of it in total when Requested > Free, and no node holds its largest member when Member >
// LargestFree (each resource's amounts are its own: the largest request of it, the node with most
// of it free).
type ResourceShortfall struct {
	// Name is the resource's name.
	Name v1.ResourceName `json:"name"`
	// Requested is what the needed members ask for in total (for MinResources: what
	// spec.minResources still asks for).
	Requested resource.Quantity `json:"requested"`
	// Free is the free amount, in total, on the nodes the members may use.
	Free resource.Quantity `json:"free"`
	// Member is the largest request of it among the members to place (for MemberFitsNowhere: the
	// request of the member that fits nowhere).
	Member resource.Quantity `json:"member"`
	// LargestFree is the most of it free on any one node the members may use.
	LargestFree resource.Quantity `json:"largestFree"`

	// DeviceClass, set on a device row (name devices/<class>: devices the members claim through
	// Dynamic Resource Allocation), names the DeviceClass the members claim (classes joined by "+"
	// when their claims name several). A device row's amounts count members, not devices (Unit
	// Members): Requested is how many of the members to place claim these devices, Member is 1,
	// Free is how many members' claims the free devices hold at once, node by node, summed over the
	// nodes the members may use, and LargestFree how many one node holds (on LargestFreeNode).
	// +optional
	DeviceClass string `json:"deviceClass,omitempty"`
	// Unit is what the amounts count when it is not the resource itself: Members for a device row.
	// +optional
	Unit ShortfallUnit `json:"unit,omitempty"`
	// LargestFreeNode, on a device row, names the node whose free devices hold the most members.
	// +optional
	LargestFreeNode string `json:"largestFreeNode,omitempty"`
}

// ShortfallUnit is what a shortfall row's amounts count.
// +kubebuilder:validation:Enum=Members
type ShortfallUnit string

// ShortfallUnitMembers: the amounts count members (one member's claims each), not the resource.
const ShortfallUnitMembers ShortfallUnit = "Members"

// DomainShortfall is how many of a gang's needed members one topology domain fits.
type DomainShortfall struct {
	// Value is the domain's value of the topology key.
	Value string `json:"value"`
	// Placeable is how many of the needed members its nodes' free resources fit.
	Placeable int32 `json:"placeable"`
	// Devices, for a gang whose members claim devices, says per device row (see ResourceShortfall's
	// DeviceClass) how many members' claims the domain's free devices hold at once.
	// +optional
	// +listType=map
	// +listMapKey=name
	Devices []DomainDeviceShortfall `json:"devices,omitempty"`
}

// DomainDeviceShortfall is how many members' claims of one device row a domain's free devices hold.
type DomainDeviceShortfall struct {
	// Name is the device row's name (devices/<class>).
	Name v1.ResourceName `json:"name"`
	// Free is how many members' claims the domain's free devices hold at once, node by node, summed.
	Free int32 `json:"free"`
}

// PodGroupList is a collection of pod groups.
//
// +kubebuilder:object:root=true
type PodGroupList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items is the list of PodGroup
	Items []PodGroup `json:"items"`
}
