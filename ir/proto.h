/* Private to ir/: helpers shared by the loader and the saver that speak protobuf-c. */
#ifndef AMP_PROTO_H
#define AMP_PROTO_H

#include "ir.h"
#include "onnx.pb-c.h"

/* Packs msg into the arena; empty when it packs to nothing. */
AmpBytes amp_proto_pack_rest(AmpArena *a, const ProtobufCMessage *msg);
/* TypeProto -> AmpType (dims in the arena). */
AmpCode amp_proto_parse_type(AmpArena *a, const Onnx__TypeProto *tp, AmpType *out);

#endif
