// Package stateapi holds Ray's state API as raygo speaks it: the rows of nodes,
// placement groups and actors in the fields of Ray's NodeState, PlacementGroupState and
// ActorState (ray/util/state/common.py) with raygo's additions, the list envelope of
// Ray's dashboard (`/api/v0/...`: limit, filters and detail), and which columns detail
// keeps (Ray's base columns, all of Ray's, or raygo's whole rows). `raygo list --format
// json`, the head's dashboard and the Python client's ray.util.state all go through it,
// so they say the same thing.
package stateapi
