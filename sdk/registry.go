package sdk

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"sort"
	"sync"

	"github.com/vmihailenco/msgpack/v5"

	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// The registry: task functions and actor types by name. The driver and its workers run
// the same executable, so both see the same registrations, made before Connect (in
// init functions, or at the top of main).

var (
	contextType = reflect.TypeOf((*context.Context)(nil)).Elem()
	errorType   = reflect.TypeOf((*error)(nil)).Elem()
)

// function is a registered callable: a task function, an actor constructor, or an
// actor method (whose receiver is bound at call time).
type function struct {
	name string
	fn   reflect.Value
	// takesContext: the first parameter is a context.Context.
	takesContext bool
	// params are the msgpack-encoded parameters, after the context and the receiver.
	params []reflect.Type
	// result is the non-error result type; nil when the function returns none.
	result reflect.Type
	// returnsError: the last result is an error.
	returnsError bool
	// receiver: fn is a method expression whose first argument is the actor.
	receiver bool
}

type actorType struct {
	name        string
	constructor *function
	methods     map[string]*function
}

var registry = struct {
	sync.RWMutex
	tasks  map[string]*function
	actors map[string]*actorType
}{tasks: map[string]*function{}, actors: map[string]*actorType{}}

// RegisterTask makes fn runnable as a task called name. fn is a function whose
// parameters may start with a context.Context (cancelled when the caller gives up), the
// others being msgpack-encodable, and which returns nothing, one value, an error, or
// one value and an error. RegisterTask panics on a bad signature or a duplicate name, as
// http.HandleFunc does: both are programming errors found on the first run.
//
//	sdk.RegisterTask("square", func(ctx context.Context, x int) (int, error) { return x * x, nil })
func RegisterTask(name string, fn any) {
	f, err := newFunction(name, reflect.ValueOf(fn), false)
	if err != nil {
		panic(fmt.Sprintf("sdk.RegisterTask(%q): %v", name, err))
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.tasks[name]; dup {
		panic(fmt.Sprintf("sdk.RegisterTask(%q): a task of that name is already registered", name))
	}
	registry.tasks[name] = f
}

// RegisterActor makes an actor type called name. constructor follows RegisterTask's
// rules and returns the actor (a pointer, usually), optionally with an error; every
// exported method of the returned type is callable with Actor.Call under its Go name,
// with the same rules for parameters and results.
//
//	type Counter struct{ n int }
//	func (c *Counter) Add(d int) int { c.n += d; return c.n }
//	sdk.RegisterActor("Counter", func(start int) *Counter { return &Counter{n: start} })
func RegisterActor(name string, constructor any) {
	ctor, err := newFunction(name, reflect.ValueOf(constructor), false)
	if err != nil {
		panic(fmt.Sprintf("sdk.RegisterActor(%q): constructor: %v", name, err))
	}
	if ctor.result == nil {
		panic(fmt.Sprintf("sdk.RegisterActor(%q): the constructor returns no actor", name))
	}
	at := &actorType{name: name, constructor: ctor, methods: map[string]*function{}}
	for i := 0; i < ctor.result.NumMethod(); i++ {
		m := ctor.result.Method(i)
		f, err := newFunction(m.Name, m.Func, true)
		if err != nil {
			panic(fmt.Sprintf("sdk.RegisterActor(%q): method %s: %v", name, m.Name, err))
		}
		at.methods[m.Name] = f
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.actors[name]; dup {
		panic(fmt.Sprintf("sdk.RegisterActor(%q): an actor type of that name is already registered", name))
	}
	registry.actors[name] = at
}

func newFunction(name string, fn reflect.Value, receiver bool) (*function, error) {
	if !fn.IsValid() || fn.Kind() != reflect.Func {
		return nil, fmt.Errorf("want a function, got %v", fn.Kind())
	}
	t := fn.Type()
	if t.IsVariadic() {
		return nil, errors.New("variadic functions are not supported")
	}
	f := &function{name: name, fn: fn, receiver: receiver}
	first := 0
	if receiver {
		first = 1
	}
	if t.NumIn() > first && t.In(first) == contextType {
		f.takesContext = true
		first++
	}
	for i := first; i < t.NumIn(); i++ {
		f.params = append(f.params, t.In(i))
	}
	results := t.NumOut()
	if results > 0 && t.Out(results-1) == errorType {
		f.returnsError = true
		results--
	}
	switch results {
	case 0:
	case 1:
		f.result = t.Out(0)
	default:
		return nil, fmt.Errorf("returns %d values besides an error; return one (a struct for several)", results)
	}
	return f, nil
}

func lookupTask(name string) (*function, error) {
	registry.RLock()
	defer registry.RUnlock()
	if f, ok := registry.tasks[name]; ok {
		return f, nil
	}
	return nil, fmt.Errorf("%w: no task function %q is registered in this program (registered: %v)", ErrInvalidArgument, name, sortedNames(registry.tasks))
}

func lookupActor(name string) (*actorType, error) {
	registry.RLock()
	defer registry.RUnlock()
	if at, ok := registry.actors[name]; ok {
		return at, nil
	}
	return nil, fmt.Errorf("%w: no actor type %q is registered in this program (registered: %v)", ErrInvalidArgument, name, sortedNames(registry.actors))
}

func (at *actorType) method(name string) (*function, error) {
	if m, ok := at.methods[name]; ok {
		return m, nil
	}
	return nil, fmt.Errorf("%w: actor type %q has no exported method %q (it has %v)", ErrInvalidArgument, at.name, name, sortedNames(at.methods))
}

func hasRegistrations() bool {
	registry.RLock()
	defer registry.RUnlock()
	return len(registry.tasks)+len(registry.actors) > 0
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// encodeArgs msgpack-encodes the caller's arguments and checks, by decoding each into
// the parameter's type, that the function will accept them: a mismatch fails at the
// call site, naming the argument, not in a worker on another node. Arguments that are
// *ObjectRef are left nil here and filled in once the ref is ready.
func (f *function) encodeArgs(what string, args []any) ([][]byte, error) {
	if len(args) != len(f.params) {
		return nil, fmt.Errorf("%w: %s takes %d arguments, got %d", ErrInvalidArgument, what, len(f.params), len(args))
	}
	encoded := make([][]byte, len(args))
	for i, arg := range args {
		if _, ok := arg.(*ObjectRef); ok {
			continue
		}
		b, err := msgpack.Marshal(arg)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: args[%d]: %v", ErrInvalidArgument, what, i, err)
		}
		if err := msgpack.Unmarshal(b, reflect.New(f.params[i]).Interface()); err != nil {
			return nil, fmt.Errorf("%w: %s: args[%d] (%T) does not decode as %s: %v", ErrInvalidArgument, what, i, arg, f.params[i], err)
		}
		encoded[i] = b
	}
	return encoded, nil
}

// call decodes args, calls the function (with receiver, if a method) and encodes its
// result. An error the function returns, or a panic, becomes a *pb.TaskError.
func (f *function) call(ctx context.Context, receiver reflect.Value, args [][]byte) (result reflect.Value, encoded []byte, taskErr *pb.TaskError) {
	if len(args) != len(f.params) {
		return reflect.Value{}, nil, &pb.TaskError{Type: "*sdk.ArgumentError", Message: fmt.Sprintf("%s takes %d arguments, got %d", f.name, len(f.params), len(args))}
	}
	in := make([]reflect.Value, 0, len(args)+2)
	if f.receiver {
		in = append(in, receiver)
	}
	if f.takesContext {
		in = append(in, reflect.ValueOf(ctx))
	}
	for i, b := range args {
		v := reflect.New(f.params[i])
		if err := decodeValue(b, v.Interface()); err != nil {
			return reflect.Value{}, nil, &pb.TaskError{Type: "*sdk.ArgumentError", Message: fmt.Sprintf("%s: args[%d]: %v", f.name, i, err)}
		}
		in = append(in, v.Elem())
	}
	out, taskErr := callRecovering(f.fn, in)
	if taskErr != nil {
		return reflect.Value{}, nil, taskErr
	}
	if f.returnsError {
		if err, _ := out[len(out)-1].Interface().(error); err != nil {
			return reflect.Value{}, nil, &pb.TaskError{Type: fmt.Sprintf("%T", err), Message: err.Error()}
		}
	}
	if f.result == nil {
		return reflect.Value{}, nil, nil
	}
	b, err := msgpack.Marshal(out[0].Interface())
	if err != nil {
		return reflect.Value{}, nil, &pb.TaskError{Type: "*sdk.ResultError", Message: fmt.Sprintf("%s: encoding the result: %v", f.name, err)}
	}
	return out[0], b, nil
}

func callRecovering(fn reflect.Value, in []reflect.Value) (out []reflect.Value, taskErr *pb.TaskError) {
	defer func() {
		if r := recover(); r != nil {
			taskErr = &pb.TaskError{Type: "panic", Message: fmt.Sprintf("%v\n%s", r, debug.Stack())}
		}
	}()
	return fn.Call(in), nil
}
