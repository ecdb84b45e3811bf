package sdk

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

type testAccount struct{ balance int }

func (a *testAccount) Deposit(ctx context.Context, n int) (int, error) {
	if n <= 0 {
		return 0, errors.New("deposit must be positive")
	}
	a.balance += n
	return a.balance, nil
}

func (a *testAccount) Balance() int { return a.balance }

func (a *testAccount) Crash() { panic("boom") }

func TestFunctionSignatures(t *testing.T) {
	cases := []struct {
		name    string
		fn      any
		wantErr string
		params  int
		ctx     bool
		result  bool
		errOut  bool
	}{
		{"nothing", func() {}, "", 0, false, false, false},
		{"context and value", func(context.Context, int) (string, error) { return "", nil }, "", 1, true, true, true},
		{"only error", func(a, b int) error { return nil }, "", 2, false, false, true},
		{"two results", func() (int, int) { return 0, 0 }, "returns 2 values", 0, false, false, false},
		{"variadic", func(...int) {}, "variadic", 0, false, false, false},
		{"not a function", 42, "want a function", 0, false, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := newFunction(tc.name, reflect.ValueOf(tc.fn), false)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(f.params) != tc.params || f.takesContext != tc.ctx || (f.result != nil) != tc.result || f.returnsError != tc.errOut {
				t.Fatalf("got %+v", f)
			}
		})
	}
}

func TestArgumentsAreCheckedAtTheCallSite(t *testing.T) {
	f, err := newFunction("pair", reflect.ValueOf(func(n int, s string) string { return s }), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.encodeArgs("task pair", []any{1}); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "takes 2 arguments, got 1") {
		t.Errorf("wrong count: %v", err)
	}
	if _, err := f.encodeArgs("task pair", []any{"x", "y"}); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "args[0] (string) does not decode as int") {
		t.Errorf("wrong type: %v", err)
	}
	encoded, err := f.encodeArgs("task pair", []any{1, "y"})
	if err != nil {
		t.Fatal(err)
	}
	_, result, taskErr := f.call(context.Background(), reflect.Value{}, encoded)
	var out string
	if taskErr != nil || msgpack.Unmarshal(result, &out) != nil || out != "y" {
		t.Fatalf("call: %v %q", taskErr, out)
	}
}

func TestActorMethodsErrorsAndPanics(t *testing.T) {
	ctor, err := newFunction("Account", reflect.ValueOf(func(start int) *testAccount { return &testAccount{balance: start} }), false)
	if err != nil {
		t.Fatal(err)
	}
	args, _ := ctor.encodeArgs("ctor", []any{10})
	actor, _, taskErr := ctor.call(context.Background(), reflect.Value{}, args)
	if taskErr != nil {
		t.Fatal(taskErr)
	}
	methods := map[string]*function{}
	for i := 0; i < ctor.result.NumMethod(); i++ {
		m := ctor.result.Method(i)
		if methods[m.Name], err = newFunction(m.Name, m.Func, true); err != nil {
			t.Fatal(err)
		}
	}
	deposit := methods["Deposit"]
	if !deposit.takesContext || len(deposit.params) != 1 {
		t.Fatalf("Deposit: %+v", deposit)
	}
	five, _ := deposit.encodeArgs("Deposit", []any{5})
	_, result, taskErr := deposit.call(context.Background(), actor, five)
	var balance int
	if taskErr != nil || msgpack.Unmarshal(result, &balance) != nil || balance != 15 {
		t.Fatalf("Deposit(5): %v, balance %d", taskErr, balance)
	}
	negative, _ := deposit.encodeArgs("Deposit", []any{-1})
	if _, _, taskErr := deposit.call(context.Background(), actor, negative); taskErr == nil || taskErr.Type != "*errors.errorString" || taskErr.Message != "deposit must be positive" {
		t.Fatalf("Deposit(-1): %v", taskErr)
	}
	if _, _, taskErr := methods["Crash"].call(context.Background(), actor, nil); taskErr == nil || taskErr.Type != "panic" || !strings.HasPrefix(taskErr.Message, "boom") {
		t.Fatalf("Crash: %v", taskErr)
	}
	_, result, _ = methods["Balance"].call(context.Background(), actor, nil)
	if msgpack.Unmarshal(result, &balance) != nil || balance != 15 {
		t.Fatalf("Balance after a failed deposit and a panic: %d, want 15", balance)
	}
}

func TestWaitAndGet(t *testing.T) {
	a, b, c := newObjectRef("a"), newObjectRef("b"), newObjectRef("c")
	value, _ := msgpack.Marshal(7)
	b.complete(value, nil, Placement{})
	ready, notReady, err := Wait(context.Background(), []*ObjectRef{a, b, c}, 1)
	if err != nil || len(ready) != 1 || ready[0] != b || len(notReady) != 2 {
		t.Fatalf("Wait 1: %v %v %v", ready, notReady, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Wait(ctx, []*ObjectRef{a, b, c}, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled ctx: %v", err)
	}
	if _, _, err := Wait(context.Background(), []*ObjectRef{a}, 2); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Wait for more than given: %v", err)
	}
	var n int
	if err := Get(context.Background(), b, &n); err != nil || n != 7 {
		t.Fatalf("Get: %v %d", err, n)
	}
	if err := Get(context.Background(), b, n); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Get into a non-pointer: %v", err)
	}
	failure := &TaskError{Function: "f", Type: "panic", Message: "x"}
	c.complete(nil, failure, Placement{})
	var got *TaskError
	if err := Get(context.Background(), c, &n); !errors.As(err, &got) || got != failure {
		t.Fatalf("Get of a failed task: %v", err)
	}
	if err := Get(ctx, a, &n); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with a cancelled ctx: %v", err)
	}
}

func TestSubmitRejectsActorOnlyOptions(t *testing.T) {
	c := &Client{}
	if _, err := c.Submit(context.Background(), "anything", nil, WithMaxRestarts(2), DetachedActor()); !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "WithMaxRestarts, DetachedActor applies to actors only") {
		t.Fatalf("got %v", err)
	}
}

func TestCloseFailsWaitingTasks(t *testing.T) {
	c := &Client{}
	c.tasks = newTaskSubmitter(c)
	ref := newObjectRef("t1")
	c.tasks.mu.Lock()
	c.tasks.queues["k"] = &schedulingQueue{key: "k", pending: []*pendingTask{{ctx: context.Background(), ref: ref, function: "f"}}}
	c.tasks.mu.Unlock()
	c.tasks.close()
	if err := Get(context.Background(), ref, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("a task waiting when the client closed: %v, want ErrClosed", err)
	}
}

func TestHandlesOfOneActorShareWhereItRuns(t *testing.T) {
	c := &Client{incarnations: map[string]*incarnation{}}
	alive := &pb.ActorInfo{ActorId: "a1", State: pb.ActorState_ACTOR_ALIVE, Address: "127.0.0.1:1", NumRestarts: 2}
	first, second := c.actorHandle(alive, nil), c.actorHandle(alive, nil)
	if first.where != second.where || len(c.incarnations) != 1 {
		t.Fatal("two handles of one actor do not share one incarnation (one watch per actor)")
	}
	first.learn(&pb.ActorInfo{ActorId: "a1", State: pb.ActorState_ACTOR_ALIVE, Address: "127.0.0.1:2", NumRestarts: 3})
	if address, restarts, err := second.target(context.Background()); err != nil || address != "127.0.0.1:2" || restarts != 3 {
		t.Fatalf("the other handle targets %s (%d restarts), %v; want the newer incarnation", address, restarts, err)
	}
	first.learn(&pb.ActorInfo{ActorId: "a1", State: pb.ActorState_ACTOR_ALIVE, Address: "127.0.0.1:1", NumRestarts: 2})
	if address, _, _ := second.target(context.Background()); address != "127.0.0.1:2" {
		t.Fatalf("an older incarnation replaced a newer one: %s", address)
	}
	first.learn(&pb.ActorInfo{ActorId: "a1", State: pb.ActorState_ACTOR_DEAD, DeathCause: "killed by KillActor"})
	if _, _, err := second.target(context.Background()); !errors.Is(err, ErrActorDied) || !strings.Contains(err.Error(), "killed by KillActor") {
		t.Fatalf("after the actor died: %v", err)
	}
}
