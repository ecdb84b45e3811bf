// Package sdk is raygo's Go client. Connect registers the program as a job (a driver,
// whose lease the client renews in the background); its non-detached placement groups
// are removed when the job ends — on Close, or when the lease lapses because the
// program died.
//
//	client, err := sdk.Connect(ctx, sdk.Options{})          // RAYGO_ADDRESS or 127.0.0.1:6380
//	defer client.Close()
//	pg, err := client.CreatePlacementGroup(ctx,
//		[]sdk.Bundle{{"GPU": 1, "CPU": 4}, {"GPU": 1, "CPU": 4}}, sdk.StrictPack)
//	info, err := pg.Ready(ctx)                              // blocks until CREATED
//	fmt.Println(info.Bundles[0].NodeID)
//	err = pg.Remove(ctx)
package sdk
