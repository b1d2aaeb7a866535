// The tag normd puts on gRPC's completion queue for one pending operation of a call. The
// transport thread that takes the tag from its queue runs it: Run(ok) calls the member
// function the event was made for, on the call object.
//
// Thread safety: an event is run by the one transport thread that polls its call's queue;
// a call keeps one event per kind of operation, at most one of each outstanding.
#ifndef NORMD_SERVER_CQ_EVENT_H_
#define NORMD_SERVER_CQ_EVENT_H_

namespace normd::server {

struct CqEvent {
  void (*fn)(void* self, bool ok);
  void* self;
  void Run(bool ok) { fn(self, ok); }
};

template <auto Method, class C>
CqEvent MakeEvent(C* self) {
  return {[](void* s, bool ok) { (static_cast<C*>(s)->*Method)(ok); }, self};
}

}  // namespace normd::server

#endif  // NORMD_SERVER_CQ_EVENT_H_
