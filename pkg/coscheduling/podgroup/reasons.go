package podgroup

// The reasons of the gang plugin's events, on pods and PodGroups. The same words are the reasons of
// the PodGroup's Scheduled condition (the status writer's), so a user who reads one reads the other.
const (
	// ReasonPodGroupNotFound (pod): the pod's PodGroup does not exist; the pod waits without holding
	// anything.
	ReasonPodGroupNotFound = "PodGroupNotFound"
	// ReasonWaitingForMembers (pod, PodGroup): fewer than minMember live pods of the group exist.
	ReasonWaitingForMembers = "WaitingForMembers"
	// ReasonWaitingForClaims (pod): minMember live pods of the group exist, but the resourceclaim
	// controller has not yet made the ResourceClaims from templates of some of them; the members wait
	// without holding anything and are let in together once it has.
	ReasonWaitingForClaims = "WaitingForClaims"
	// ReasonGangInfeasible (PodGroup): the nodes' free resources cannot hold the gang; nothing was
	// reserved.
	ReasonGangInfeasible = "GangInfeasible"
	// ReasonWaitingForQuorum (PodGroup): an attempt has been under way for a few seconds; its members
	// are reserved one by one and wait at Permit for the rest of the quorum.
	ReasonWaitingForQuorum = "WaitingForQuorum"
	// ReasonQuorumReached (PodGroup): minMember live members are reserved or bound; the waiting ones
	// go on to bind.
	ReasonQuorumReached = "QuorumReached"
	// ReasonGangRejected (pod, PodGroup): the attempt failed (a member could not be placed, was
	// rejected, or the PodGroup was deleted); every waiting member was rejected and released what it
	// held.
	ReasonGangRejected = "GangRejected"
	// ReasonGangTimedOut (pod, PodGroup): the quorum was not reached within the schedule timeout.
	ReasonGangTimedOut = "GangTimedOut"
	// ReasonDomainChosen (PodGroup): a gang with a topology policy was given a domain for its
	// attempt; the message says which and at which level of the policy.
	ReasonDomainChosen = "DomainChosen"
	// ReasonInvalidTopologyPolicy (pod): the member's topology annotations are malformed; it is not
	// placed until they are fixed.
	ReasonInvalidTopologyPolicy = "InvalidTopologyPolicy"
	// ReasonBelowQuorum (PodGroup): some but fewer than minMember live members have been bound for
	// longer than the group's schedule timeout (e.g. a member's bind failed after the quorum and it
	// cannot be placed again, or members were evicted).
	ReasonBelowQuorum = "BelowQuorum"
	// ReasonPreempting (PodGroup): the gang did not fit, so lower-priority pods (whole gangs among
	// them) are being preempted to make room for it; its members are nominated to the freed nodes and
	// the gang is placed once the victims are gone.
	ReasonPreempting = "Preempting"
	// ReasonMixedPriorities (PodGroup, Warning): the gang's members have different priorities; it
	// preempts as one gang of the lowest of them (see gang.Priority).
	ReasonMixedPriorities = "MixedPriorities"
	// ReasonReserved (PodGroup): the gang waited reservation.afterSeconds for room, and now holds the
	// room that frees on the nodes its missing members will use (its members are nominated there);
	// the message says how many nodes and how much.
	ReasonReserved = "Reserved"
	// ReasonReservationEnded (PodGroup): the gang holds its room no more (it timed out, or the room it
	// counted on is gone); the message says why.
	ReasonReservationEnded = "ReservationEnded"
	// ReasonPodGroupClaimOrder (pod, Warning): the member lists its in-tree PodGroup's ResourceClaim
	// before a claim of its own (or beside a DRA-backed extended resource), the order in which
	// upstream's DynamicResources plugin (1.37) can give one claim the other's devices; it is not
	// placed (spec.resourceClaims cannot change: the pod must be made again, the PodGroup's claims
	// last).
	ReasonPodGroupClaimOrder = "PodGroupClaimOrder"
)

// The types of the PodGroup conditions the scheduler maintains: Scheduled for every gang, Topology for
// gangs with a topology policy once a domain was chosen (reason PreferredDomain, RequiredDomain or
// Anywhere; the message names the domain), Reserved while a gang holds a reservation (True, reason
// RoomHeld; the message says how many nodes and how much) and once it ended (False; the reason says
// how).
const (
	ConditionScheduled = "Scheduled"
	ConditionTopology  = "Topology"
	ConditionReserved  = "Reserved"
)

// ReasonRoomHeld is the Reserved condition's reason while the gang holds a reservation.
const ReasonRoomHeld = "RoomHeld"

// ReasonPending is the Scheduled condition's reason while minMember live pods exist and no attempt has
// started or ended yet.
const ReasonPending = "Pending"
