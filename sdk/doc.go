// Package sdk is raygo's Go client: placement groups, tasks, actors and object refs,
// and the worker runtime that runs them.
//
// Connect registers the program as a job (a driver, whose lease the client renews in
// the background); its non-detached placement groups and actors end with the job — on
// Close, or when the lease lapses because the program died.
//
//	client, err := sdk.Connect(ctx, sdk.Options{})          // RAYGO_ADDRESS or 127.0.0.1:6380
//	defer client.Close()
//	pg, err := client.CreatePlacementGroup(ctx,
//		[]sdk.Bundle{{"GPU": 1, "CPU": 4}, {"GPU": 1, "CPU": 4}}, sdk.StrictPack)
//	info, err := pg.Ready(ctx)                              // blocks until CREATED
//	fmt.Println(info.Bundles[0].NodeID)
//	err = pg.Remove(ctx)
//
// # Tasks and actors
//
// Register task functions and actor types by name before Connect (in init, or at the
// top of main), then submit them:
//
//	func init() {
//		sdk.RegisterTask("square", func(x int) int { return x * x })
//		sdk.RegisterActor("Counter", func(start int) *Counter { return &Counter{n: start} })
//	}
//	ref, err := client.Submit(ctx, "square", sdk.Args(3), sdk.InPlacementGroup(pg, 0))
//	var nine int
//	err = sdk.Get(ctx, ref, &nine)
//	counter, err := client.CreateActor(ctx, "Counter", sdk.Args(0), sdk.InPlacementGroup(pg, 1), sdk.WithMaxRestarts(2))
//	ref, err = counter.Call(ctx, "Add", 1)
//
// Workers are this same program: Connect uploads its executable to the GCS
// (content-addressed, once), and raylets start it in worker mode on any node, with
// CUDA_VISIBLE_DEVICES naming the GPUs (or MIG devices) of the task or actor and
// CUDA_DEVICE_ORDER=PCI_BUS_ID. In a worker, Connect serves the registered functions
// and never returns, so code before Connect runs in workers too; call ServeIfWorker
// first in main if that matters. Arguments and results travel msgpack-encoded.
//
// The client does not choose nodes: the GCS orders the nodes for each task shape with the
// same chooser it runs for actors (Ray's DEFAULT hybrid policy unless WithSpread, OnNode
// or InPlacementGroup say otherwise), and the client leases workers from them in order.
//
// Resources default as Ray's: a task holds 1 CPU while it runs, an actor none (see
// WithCPUs, WithGPUs, WithResources). A task whose worker dies runs again up to
// WithMaxRetries (default 3); an actor whose worker dies is restarted up to
// WithMaxRestarts (default 0), and calls through one handle run in order. Removing a
// placement group kills the tasks and actors inside it. Every blocking call takes a
// context and ends with it.
package sdk
