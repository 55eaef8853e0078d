package gang

import (
	"slices"
	"sort"

	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/gangfit"
	"github.com/custom-scheduler/custom-scheduler/pkg/coscheduling/tree"
)

// JobToReserve is the job the group of key reserves for when it found no room (see ReserveIn.Job):
// its holder group and the groups the job needs with it (as the holder's own check places them, see
// PreFilterIn.neededWays: every group under the topmost gang composite above it where each composite
// needs all its children; of K of N replicas, those its reservation holds room for while they are a
// choice, then those closest to ready, then by name; and the groups ready already), each group's
// missing members by its gang's state, in the job's domain. The holder is the job's group that holds
// a reservation already; else, among the groups with the members their minimum needs, the one whose
// way places the fewest members, the first in the tree's order (depth first, children by name) on a
// tie (see reserveWay): the job is the same whichever of its groups asks, so that its room does not
// move with the asker, and a reservation held is the one that moves. ok is false, and the group
// reserves alone, when that cannot be said: the group is in no gang composite, a composite below the
// job's is basic or has a topology of its own, a group has a required topology of its own
// (required(key)), which one domain for the job's room would not honour, no group has its members, or
// the tree has too few children. Under the plugin's lock (it reads the gangs' state). O(the groups
// with members × their ways × the job's pods).
func JobToReserve(in PreFilterIn, root *tree.Branch, key string) (JobPreemption, bool) {
	if root == nil {
		return JobPreemption{}, false
	}
	job := root.JobOf(key)
	if job == nil || !reservable(job) {
		return JobPreemption{}, false
	}
	in.GroupMembers = memoBy(in.GroupMembers) // each group's members are read once per holder's way
	var held string
	var withMembers []string
	leaves := map[string]tree.Node{}
	for _, n := range job.Leaves() {
		leaves[n.Key()] = n
		if own, ok := in.OwnDomain[n.Key()]; ok && own == "" {
			return JobPreemption{}, false // a policy that cannot be read
		}
		if gr := in.toPlace(n, in.GroupMembers(n.Key())); gr.Need > len(gr.Candidates) {
			continue // short of members: it cannot hold the job's room
		}
		withMembers = append(withMembers, n.Key())
		if g := in.Gangs[n.Key()]; held == "" && g != nil && g.Reserve.Held() {
			held = n.Key()
		}
	}
	holder := held
	if len(withMembers) == 0 {
		return JobPreemption{}, false
	}
	// The groups its reservation holds room for are taken first while they are still a choice.
	var holds []string
	if g := in.Gangs[holder]; g != nil && g.Reserve.Held() {
		holds = g.Reserve.Groups
	}
	prefer := func(key string) bool { return slices.Contains(holds, key) }
	var others []gangfit.Group
	ok := false
	if held == "" {
		// The way of the fewest members among every group's (the first group's where they tie):
		// of K of N replicas not alike, the holder itself may be one to leave out.
		holder, others, ok = in.reserveWay(root, withMembers, leaves, prefer)
	} else if others, ok = in.needed(root, held, prefer); !ok {
		// A choice among groups not alike: the room held moves only among its holder's ways.
		_, others, ok = in.reserveWay(root, []string{held}, leaves, prefer)
	}
	if !ok {
		return JobPreemption{}, false
	}
	// The groups ready already stay the job's (Needed counts them, and lists only those short), so
	// that the room's groups do not change as its groups' members are reserved.
	taken := map[string]bool{holder: true}
	for _, o := range others {
		taken[o.Key] = true
	}
	for _, n := range job.Leaves() {
		if k := n.Key(); !taken[k] && in.count(k) >= n.Min {
			taken[k] = true
			others = append(others, in.toPlace(n, in.GroupMembers(k)))
		}
	}
	sort.Slice(others, func(a, b int) bool { return others[a].Key < others[b].Key })
	own := in.GroupMembers(holder)
	j := JobPreemption{Job: job.Key(), Unit: job.Key(), Holder: holder, Keys: []string{holder}, Members: slices.Clip(own), // appended to below: never into the memo's
		Groups: []gangfit.Group{in.toPlace(leaves[holder], own)}}
	for _, o := range others {
		j.Keys, j.Groups = append(j.Keys, o.Key), append(j.Groups, o)
		j.Members = append(j.Members, in.GroupMembers(o.Key)...)
	}
	if job.Domain != "" || len(job.Preferred) > 0 {
		j.Domain = domainOf(in, job)
	}
	j.RefusedDevices = JobRefusals(nil, in.Gangs, j.Keys, in.Now, in.Nodes)
	// Groups to place in domains below the job's, or of their own: the room is planned in parts.
	if j.Outer, j.Parts, ok = jobParts(in, root, job, holder, j.Groups, true); !ok {
		return JobPreemption{}, false
	}
	if j.Parts == nil && j.Outer != nil {
		// One search, in the domain that holds the whole job (a composite's with all its groups, or
		// one above the job's).
		j.Domain = j.Outer
	}
	return j, true
}

// reservable reports whether the composites of b's tree are gang composites (K of N choices are
// Needed's; domains below the top make parts, see jobParts).
func reservable(b *tree.Branch) bool {
	if !b.Composite {
		return true
	}
	if !b.Gang {
		return false
	}
	for _, c := range b.Children {
		if !reservable(c) {
			return false
		}
	}
	return true
}

// reserveWay is JobToReserve's choice of the groups to hold room for: of the ways of each of holders
// (the groups that may hold the job's room, in the tree's order; see PreFilterIn.neededWays, prefer
// first), the one that places the fewest members with its holder, one the check can judge (judged)
// before one it cannot, the first in that order on a tie. Of K of N replicas not alike, the room then
// goes to what the free room can hold soonest; of alike ones, or of a job of all its groups, to the
// first holder's way, as its own check takes it. The holders being every group with its members, the
// choice is the job's whichever group asks. ok is false when no holder has a way (too few children).
// O(holders × neededWays).
func (in PreFilterIn) reserveWay(root *tree.Branch, holders []string, leaves map[string]tree.Node, prefer func(key string) bool) (holder string, others []gangfit.Group, ok bool) {
	best := -1
	for _, h := range holders {
		own := in.toPlace(leaves[h], in.GroupMembers(h))
		for _, way := range in.neededWays(root, h, prefer) {
			all := append([]gangfit.Group{own}, way...)
			if n := 2*needOf(all) + b2i(!judged(all)); best < 0 || n < best {
				best, holder, others = n, h, way
			}
		}
	}
	return holder, others, best >= 0
}

// needOf is how many members groups place.
func needOf(groups []gangfit.Group) int {
	n := 0
	for _, g := range groups {
		n += max(g.Need, 0)
	}
	return n
}
