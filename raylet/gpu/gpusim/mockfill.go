package gpusim

import (
	"reflect"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

var returnType = reflect.TypeFor[nvml.Return]()

// FillUnsetWithNotSupported makes a go-nvml mock (a pointer to a moq struct such as
// mock.Interface or mock.Device, whose methods call its XxxFunc fields and panic when one is
// nil) answer ERROR_NOT_SUPPORTED from every function left unset: each nil XxxFunc field
// becomes a function returning zero values with every nvml.Return result set to
// ERROR_NOT_SUPPORTED. Functions already set are kept. Call it before the mock is shared:
// it writes the fields without a lock.
func FillUnsetWithNotSupported(mockStruct any) { fillUnset(mockStruct, nil) }

// RecordUnsetCalls is FillUnsetWithNotSupported, and each call of a function it set
// calls record with the function's field name ("DeviceGetCountFunc") first: tests use it
// to see what code calls on a mock, e.g. nothing after a failed Init.
func RecordUnsetCalls(mockStruct any, record func(name string)) { fillUnset(mockStruct, record) }

func fillUnset(mockStruct any, record func(name string)) {
	v := reflect.ValueOf(mockStruct).Elem()
	for i := 0; i < v.NumField(); i++ {
		field, name := v.Field(i), v.Type().Field(i).Name
		if field.Kind() != reflect.Func || !field.IsNil() || !field.CanSet() || !strings.HasSuffix(name, "Func") {
			continue
		}
		results := notSupportedResults(field.Type())
		field.Set(reflect.MakeFunc(field.Type(), func([]reflect.Value) []reflect.Value {
			if record != nil {
				record(name)
			}
			return results
		}))
	}
}

func notSupportedResults(fn reflect.Type) []reflect.Value {
	results := make([]reflect.Value, fn.NumOut())
	for i := range results {
		if fn.Out(i) == returnType {
			results[i] = reflect.ValueOf(nvml.ERROR_NOT_SUPPORTED)
		} else {
			results[i] = reflect.Zero(fn.Out(i))
		}
	}
	return results
}

// delegateToHandleMethods sets each nil library-level function of a mock.Interface that
// takes a handle first (DeviceGetUUIDFunc(device), GpuInstanceGetInfoFunc(gi)) to call the
// handle's method (device.GetUUID()), as the real library does, so lib.DeviceGetX(dev) and
// dev.GetX() answer alike. Call it before the mock is shared.
func delegateToHandleMethods(iface *mock.Interface) {
	v := reflect.ValueOf(iface).Elem()
	for i := 0; i < v.NumField(); i++ {
		field, name := v.Field(i), v.Type().Field(i).Name
		if field.Kind() != reflect.Func || !field.IsNil() || !field.CanSet() {
			continue
		}
		fnType := field.Type()
		if fnType.NumIn() == 0 || fnType.IsVariadic() || fnType.In(0).Kind() != reflect.Interface {
			continue
		}
		handleType := fnType.In(0)
		methodName, ok := strings.CutPrefix(strings.TrimSuffix(name, "Func"), handleType.Name())
		if !ok {
			continue
		}
		method, ok := handleType.MethodByName(methodName)
		if !ok || !sameSignatureAfterHandle(method.Type, fnType) {
			continue
		}
		noHandle := notSupportedResults(fnType)
		field.Set(reflect.MakeFunc(fnType, func(args []reflect.Value) []reflect.Value {
			if args[0].IsNil() {
				return noHandle
			}
			return args[0].MethodByName(methodName).Call(args[1:])
		}))
	}
}

// sameSignatureAfterHandle reports whether method (a handle method, receiver excluded) has
// the parameters of fn after its first and the same results.
func sameSignatureAfterHandle(method, fn reflect.Type) bool {
	if method.NumIn() != fn.NumIn()-1 || method.NumOut() != fn.NumOut() || method.IsVariadic() {
		return false
	}
	for k := 0; k < method.NumIn(); k++ {
		if method.In(k) != fn.In(k+1) {
			return false
		}
	}
	for k := 0; k < method.NumOut(); k++ {
		if method.Out(k) != fn.Out(k) {
			return false
		}
	}
	return true
}
