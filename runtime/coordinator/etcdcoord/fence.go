package etcdcoord

import (
	"context"
	"errors"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNotLeader reports a write refused because this coordinator is not the
// leader (any more): its election key is gone — its lease expired or was
// revoked — so another coordinator may lead. It is how a deposed leader is
// fenced off.
var ErrNotLeader = errors.New("etcdcoord: not the leader: this coordinator's election key is gone")

// errCompare reports a transaction whose own comparison (not the fence)
// failed.
var errCompare = errors.New("etcdcoord: comparison failed")

// fence guards the writes of a leader: each is a transaction that applies
// only while the leader's election key still exists with the revision it
// was created at. A key is deleted when its lease ends and never comes
// back with the same create revision, so once the lease of a deposed
// leader has expired, none of its writes can land — not even one that was
// delayed in the network. The zero fence guards nothing.
type fence struct {
	key string
	rev int64
}

func (f fence) zero() bool { return f.key == "" }

// txn runs If(fence, cmps...) Then(then...) Else(Get fence key, orElse...).
// It fails with ErrNotLeader if the fence failed and with errCompare if
// another comparison did; the response is returned in both cases, its
// Else responses after the fence's (see elseResponses).
func (f fence) txn(ctx context.Context, kv clientv3.KV, cmps []clientv3.Cmp, then []clientv3.Op, orElse ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if !f.zero() {
		cmps = append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(f.key), "=", f.rev)}, cmps...)
		orElse = append([]clientv3.Op{clientv3.OpGet(f.key)}, orElse...)
	}
	resp, err := kv.Txn(ctx).If(cmps...).Then(then...).Else(orElse...).Commit()
	if err != nil {
		return nil, err
	}
	if resp.Succeeded {
		return resp, nil
	}
	if !f.zero() {
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 || kvs[0].CreateRevision != f.rev {
			return resp, ErrNotLeader
		}
	}
	return resp, errCompare
}

// elseResponses returns the responses of a failed txn's own Else ops.
func (f fence) elseResponses(resp *clientv3.TxnResponse) []*clientv3.GetResponse {
	rs := resp.Responses
	if !f.zero() {
		rs = rs[1:]
	}
	out := make([]*clientv3.GetResponse, len(rs))
	for i, r := range rs {
		out[i] = (*clientv3.GetResponse)(r.GetResponseRange())
	}
	return out
}
