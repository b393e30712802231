package oss

import (
	"context"

	"nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/fault"
	"nacre/internal/objrec"
	"nacre/internal/ost"
)

// The checker's and fault injection's calls (see api/oss.proto).

func (v *service) LfsckCheck(ctx context.Context, req *nacrepb.LfsckCheckRequest) (*nacrepb.LfsckCheckReply, error) {
	if err := fault.Hit("oss.lfsck.check"); err != nil {
		return nil, errno.New(errno.Unavailable, err.Error())
	}
	if req.Delta {
		for i := 1; i < len(req.Oids); i++ {
			req.Oids[i] += req.Oids[i-1]
		}
	}
	for i := 1; i < len(req.Oids); i++ {
		if req.Oids[i] < req.Oids[i-1] {
			return nil, errno.Errorf(errno.InvalidArgument, "lfsck check: oids not ascending at %d", i)
		}
	}
	r, err := v.s.store.CheckObjects(req.Seq, req.Oids, req.Digests)
	if err != nil {
		return nil, storeErr(err)
	}
	return &nacrepb.LfsckCheckReply{Missing: r.Missing, Mismatched: r.Mismatched, Attrs: r.Attrs, Uninitialized: r.Uninitialized}, nil
}

func (v *service) LfsckSummary(ctx context.Context, req *nacrepb.LfsckSummaryRequest) (*nacrepb.LfsckSummaryReply, error) {
	if err := fault.Hit("oss.lfsck.summary"); err != nil {
		return nil, errno.New(errno.Unavailable, err.Error())
	}
	span, block := req.Span, uint64(req.Block)
	if span == 0 {
		span = 1 << 16
	}
	if block == 0 {
		block = 1 << 10
	}
	sum, err := v.s.store.Summarize(req.Seq, req.From, span, block)
	if err != nil {
		return nil, storeErr(err)
	}
	return &nacrepb.LfsckSummaryReply{Exists: sum.Exists, Uninitialized: sum.Uninit, Sums: sum.Sums, Done: sum.Done, Next: sum.Next}, nil
}

func (v *service) LfsckOrphans(ctx context.Context, req *nacrepb.LfsckOrphansRequest) (*nacrepb.LfsckOrphansReply, error) {
	if err := fault.Hit("oss.lfsck.orphans"); err != nil {
		return nil, errno.New(errno.Unavailable, err.Error())
	}
	objs, next, err := v.s.store.OrphanObjects(req.Seq, req.From, req.To, req.Referenced, int(req.Max))
	if err != nil {
		return nil, storeErr(err)
	}
	return &nacrepb.LfsckOrphansReply{Objects: objs, Next: next}, nil
}

func (v *service) LfsckRepair(ctx context.Context, req *nacrepb.LfsckObjRepairRequest) (*nacrepb.LfsckObjRepairReply, error) {
	done, err := v.s.store.RepairObjects(ost.RepairsOf(req.Items))
	if err != nil {
		return nil, storeErr(err)
	}
	return &nacrepb.LfsckObjRepairReply{Done: done}, nil
}

func (v *service) LfsckDigest(ctx context.Context, req *nacrepb.LfsckDigestRequest) (*nacrepb.LfsckDigestReply, error) {
	d, n, err := v.s.store.StoreDigest()
	if err != nil {
		return nil, storeErr(err)
	}
	return &nacrepb.LfsckDigestReply{Digest: d, Keys: n}, nil
}

func (v *service) FaultObject(ctx context.Context, req *nacrepb.FaultObjectRequest) (*nacrepb.FaultObjectReply, error) {
	objs, err := v.objects("fault", []*nacrepb.StripeObject{req.Object})
	if err != nil {
		return nil, err
	}
	var rec *objrec.Rec
	if req.Record != nil {
		r := objrec.FromAttr(req.Record)
		rec = &r
	}
	if err := v.s.store.FaultObject(req.Kind, objs[0], rec); err != nil {
		return nil, storeErr(err)
	}
	v.s.log.Warn("fault injected", "kind", req.Kind, "object", objs[0].String())
	return &nacrepb.FaultObjectReply{}, nil
}

func (v *service) FaultArm(ctx context.Context, req *nacrepb.FaultArmRequest) (*nacrepb.FaultArmReply, error) {
	if err := fault.ArmPB(req); err != nil {
		return nil, errno.New(errno.InvalidArgument, err.Error())
	}
	v.s.log.Warn("fault point armed", "point", req.Point, "action", req.Action)
	return &nacrepb.FaultArmReply{Armed: fault.Armed()}, nil
}
