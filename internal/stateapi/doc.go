// Package stateapi holds Ray's state API as raygo speaks it: the rows of nodes,
// placement groups and actors in the fields of Ray's NodeState, PlacementGroupState and
// ActorState (ray/util/state/common.py) with raygo's additions, and the list envelope of
// Ray's dashboard (`/api/v0/...`: limit and filters). `raygo list --format json` prints
// these rows and the head's dashboard serves them, so both say the same thing.
package stateapi
