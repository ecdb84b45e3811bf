package gcs

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/raygo-dev/raygo/gcs/store"
	"github.com/raygo-dev/raygo/internal/fielderr"
	pb "github.com/raygo-dev/raygo/protos/raygopb"
)

// kvNamespaceSeparator ends the namespace part of a stored key. Namespaces may not
// contain it, so one namespace's keys can never be read through another's prefix.
const kvNamespaceSeparator = "\x00"

// kvService is the namespaced internal key-value store, one row per key in store.TableKV.
type kvService struct {
	pb.UnimplementedInternalKVServiceServer
	store store.Store
	log   zerolog.Logger
	// holders keeps the classes of a finished job's live detached actors (nil: none).
	holders functionHolders
}

// functionHolders tells which of a finished job's functions must outlive it.
type functionHolders interface {
	// classKeysInUse is the set of KV keys (namespace "fun") of the classes of the job's
	// detached Python actors that are not DEAD. Safe for concurrent use; callers hold no
	// lock of the holder's.
	classKeysInUse(jobID string) map[string]bool
}

// Python drivers keep the functions their tasks run in the KV, as Ray keeps its function
// table there: namespace "fun", key "RemoteFunction:<job id>:<sha256>"
// (pyclient/raygo/_task_client.py). Objects too large to travel inline (ray.put, task
// results) are kept there too, in chunks of one KV value: namespace "obj", key
// "Object:<job id>:<object id>:<chunk index>" (pyclient/raygo/_objects.py), at most
// maxObjectBytes each; their owner deletes them when its last ref is gone. A finished
// job's functions and objects are deleted with it, but for the classes of its detached
// actors that still live (so they can restart): the actor manager deletes each of those
// when its last detached actor dies (deleteFunctions).
const (
	functionKVNamespace = "fun"
	functionKeyPrefix   = "RemoteFunction:"
	objectKVNamespace   = "obj"
	objectKeyPrefix     = "Object:"
	// functionCleanupTimeout bounds the deletion of one finished job's functions and objects.
	functionCleanupTimeout = 10 * time.Second
)

var _ jobListener = (*kvService)(nil)

// onJobDead deletes the functions and objects the finished job put (its workers are
// killed with it), but the classes of its live detached actors.
func (k *kvService) onJobDead(job *pb.JobInfo) {
	ctx, cancel := context.WithTimeout(context.Background(), functionCleanupTimeout)
	defer cancel()
	for _, kind := range []struct{ namespace, keyPrefix string }{
		{functionKVNamespace, functionKeyPrefix},
		{objectKVNamespace, objectKeyPrefix},
	} {
		stored := kind.namespace + kvNamespaceSeparator
		keys, err := k.store.Keys(ctx, store.TableKV, stored+kind.keyPrefix+job.JobId+":")
		if err == nil && k.holders != nil && kind.namespace == functionKVNamespace {
			kept := k.holders.classKeysInUse(job.JobId)
			keys = slices.DeleteFunc(keys, func(key string) bool {
				return kept[strings.TrimPrefix(key, stored)]
			})
		}
		if err == nil && len(keys) > 0 {
			_, err = k.store.Delete(ctx, store.TableKV, keys...)
		}
		if err != nil {
			k.log.Warn().Err(err).Str("job_id", job.JobId).Str("namespace", kind.namespace).Msg("could not delete the finished job's functions or objects from the KV")
		}
	}
}

// deleteFunctions deletes functions by their keys in namespace "fun": the classes of
// detached actors that no live actor uses after their job ended.
func (k *kvService) deleteFunctions(keys ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), functionCleanupTimeout)
	defer cancel()
	stored := make([]string, len(keys))
	for i, key := range keys {
		stored[i] = functionKVNamespace + kvNamespaceSeparator + key
	}
	if _, err := k.store.Delete(ctx, store.TableKV, stored...); err != nil {
		k.log.Warn().Err(err).Strs("keys", keys).Msg("could not delete a detached actor's class from the KV")
	}
}

func kvKey(namespace string, key []byte) (string, error) {
	if err := checkName("namespace", namespace); err != nil {
		return "", err
	}
	return namespace + kvNamespaceSeparator + string(key), nil
}

func requireKey(key []byte) error {
	if len(key) > maxNameBytes {
		return errorf(fielderr.ErrInvalid, "key: must be at most %d bytes, got %d", maxNameBytes, len(key))
	}
	if len(key) == 0 {
		return errorf(fielderr.ErrInvalid, "%s", "key: required")
	}
	return nil
}

func storeError(op string, err error) error {
	return errorf(errUnavailable, "kv %s: %v", op, err)
}

func (k *kvService) KVGet(ctx context.Context, req *pb.KVGetRequest) (*pb.KVGetReply, error) {
	if err := requireKey(req.Key); err != nil {
		return nil, err
	}
	key, err := kvKey(req.Namespace, req.Key)
	if err != nil {
		return nil, err
	}
	value, found, err := k.store.Get(ctx, store.TableKV, key)
	if err != nil {
		return nil, storeError("get", err)
	}
	return &pb.KVGetReply{Found: found, Value: value}, nil
}

func (k *kvService) KVPut(ctx context.Context, req *pb.KVPutRequest) (*pb.KVPutReply, error) {
	if err := requireKey(req.Key); err != nil {
		return nil, err
	}
	key, err := kvKey(req.Namespace, req.Key)
	if err != nil {
		return nil, err
	}
	if len(req.Value) > maxKVValueBytes {
		return nil, errorf(fielderr.ErrInvalid, "value: must be at most %d bytes, got %d", maxKVValueBytes, len(req.Value))
	}
	if req.Namespace == objectKVNamespace {
		if err := checkObjectChunk(string(req.Key)); err != nil {
			return nil, errorf(fielderr.ErrInvalid, "%s", err)
		}
	}
	if !req.Overwrite {
		added, err := k.store.PutIfAbsent(ctx, store.TableKV, key, req.Value)
		if err != nil {
			return nil, storeError("put", err)
		}
		return &pb.KVPutReply{Added: added}, nil
	}
	_, existed, err := k.store.Get(ctx, store.TableKV, key)
	if err != nil {
		return nil, storeError("put", err)
	}
	if err := k.store.Put(ctx, store.TableKV, key, req.Value); err != nil {
		return nil, storeError("put", err)
	}
	return &pb.KVPutReply{Added: !existed}, nil
}

func (k *kvService) KVDel(ctx context.Context, req *pb.KVDelRequest) (*pb.KVDelReply, error) {
	key, err := kvKey(req.Namespace, req.Key)
	if err != nil {
		return nil, err
	}
	keys := []string{key}
	if req.DelByPrefix {
		if keys, err = k.store.Keys(ctx, store.TableKV, key); err != nil {
			return nil, storeError("del", err)
		}
	} else if err := requireKey(req.Key); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return &pb.KVDelReply{}, nil
	}
	n, err := k.store.Delete(ctx, store.TableKV, keys...)
	if err != nil {
		return nil, storeError("del", err)
	}
	return &pb.KVDelReply{DeletedNum: int64(n)}, nil
}

func (k *kvService) KVKeys(ctx context.Context, req *pb.KVKeysRequest) (*pb.KVKeysReply, error) {
	prefix, err := kvKey(req.Namespace, req.Prefix)
	if err != nil {
		return nil, err
	}
	keys, err := k.store.Keys(ctx, store.TableKV, prefix)
	if err != nil {
		return nil, storeError("keys", err)
	}
	nsPrefix := len(req.Namespace) + len(kvNamespaceSeparator)
	out := make([][]byte, len(keys))
	for i, key := range keys {
		out[i] = []byte(key[nsPrefix:])
	}
	return &pb.KVKeysReply{Keys: out}, nil
}

func (k *kvService) KVExists(ctx context.Context, req *pb.KVExistsRequest) (*pb.KVExistsReply, error) {
	if err := requireKey(req.Key); err != nil {
		return nil, err
	}
	key, err := kvKey(req.Namespace, req.Key)
	if err != nil {
		return nil, err
	}
	_, found, err := k.store.Get(ctx, store.TableKV, key)
	if err != nil {
		return nil, storeError("exists", err)
	}
	return &pb.KVExistsReply{Exists: found}, nil
}
