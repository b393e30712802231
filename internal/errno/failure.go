package errno

import pb "nacre/api/nacrepb"

// Failure is e as the transports carry it.
func (e *Error) Failure() *pb.Failure {
	f := &pb.Failure{Code: uint32(e.Code), Message: e.Msg, Reason: string(e.Reason)}
	if e.Leader != nil {
		f.NotLeader, f.LeaderId, f.LeaderAddr = true, e.Leader.ID, e.Leader.Addr
	}
	return f
}

// FromFailure is the Error a transport received as f.
func FromFailure(f *pb.Failure) *Error {
	e := &Error{Code: Code(f.Code), Msg: f.Message, Reason: Reason(f.Reason)}
	if e.Code == OK {
		e.Code = Unknown
	}
	if f.NotLeader {
		e.Leader = &Leader{ID: f.LeaderId, Addr: f.LeaderAddr}
	}
	return e
}
