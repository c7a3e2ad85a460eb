// Package etcdtest runs a real etcd server for the tests of packages that
// coordinate through etcd (runtime/coordinator/etcdcoord).
//
// A test binary starts at most one server, on first use (Require), and
// stops it when its tests end (Main, called from TestMain); tests share it
// and keep apart by key prefix (Prefix gives each test its own). The server
// is the etcd binary named by $STATEGEN_ETCD, or the one on PATH — Debian's
// etcd-server package, which .ci/etcd.sh installs. It binds only 127.0.0.1,
// on free ports, keeps its data in a temporary directory (in /dev/shm when
// there is one, so that its fsyncs cost nothing), and runs in a process
// group of its own that Stop kills whole; on Linux it also dies with the
// test binary, should that be killed before it can stop the server.
//
// Its raft heartbeat is 10 ms and its election timeout 100 ms rather than
// etcd's 100 ms and 1 s: a single member elects itself at once, and the
// server accepts leases of one second (etcd raises a lease's TTL to one and
// a half election timeouts), which keeps failover tests short.
//
// Without an etcd binary, Require fails the test when the environment says
// CI=true — CI must run .ci/etcd.sh first — and skips it otherwise, with a
// message saying how to install one.
package etcdtest
