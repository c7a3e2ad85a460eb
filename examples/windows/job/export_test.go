package job

import (
	"context"
	"fmt"

	"github.com/stategen/stategen/checkpoint"
	"github.com/stategen/stategen/runtime"
)

// restoreListsOnly restores the operator lists of instance i of p and no
// keyed state: the progress says the state up to the checkpoint is there,
// but it is not.
func restoreListsOnly(ctx context.Context, s checkpoint.Storage, ckpt string, i, p int, store runtime.Store) error {
	r, err := checkpoint.Open(ctx, s, ckpt)
	if err != nil {
		return err
	}
	op, err := r.Metadata().Operator(operatorID)
	if err != nil {
		return err
	}
	var lists [][]runtime.OriginElement
	for k, in := range op.Instances {
		_, ls, err := runtime.DecodeOperatorState(in.OperatorState)
		if err != nil {
			return err
		}
		var l []runtime.OriginElement
		for _, d := range ls {
			for _, e := range d.Elements {
				l = append(l, runtime.OriginElement{Origin: k, Data: e})
			}
		}
		lists = append(lists, l)
	}
	if len(lists) == 0 {
		return fmt.Errorf("no operator lists")
	}
	return runtime.RestoreOperatorList(store, "progress", runtime.SplitOperatorList(true, lists, i, p))
}
