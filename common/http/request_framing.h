#pragma once
// Request framing: whether the server can tell, without guessing, where a
// request's body ends (RFC 9112 section 6).
//
// Boost.Beast 1.74's request parser is lenient about Transfer-Encoding in ways
// that let two HTTP implementations disagree on the body length (request
// smuggling through a proxy in front of kilnd):
//   - a coding list whose last element is not exactly `chunked` (`xchunked`,
//     `gzip`, `chunked, identity`, `chunked, chunked`, an empty value) is taken
//     as "no body", so the body's bytes are parsed as the next request;
//   - `gzip, chunked` is read as chunked and the gzip coding is silently
//     dropped;
//   - `Transfer-Encoding: gzip` followed by `Content-Length` is framed by the
//     Content-Length;
//   - HTTP/1.0 requests are framed by Transfer-Encoding like HTTP/1.1 ones.
// (Beast does refuse a second Transfer-Encoding line after one that ended in
// chunked, and Content-Length next to a chunked Transfer-Encoding.)
//
// The server implements exactly one transfer coding, `chunked`, so the rule is
// strict: a request with a Transfer-Encoding field is accepted only when it is
// HTTP/1.1 or later, has no Content-Length, and the codings of all its
// Transfer-Encoding lines together are exactly one `chunked` (compared without
// regard to case, RFC 9112 section 7; surrounding whitespace and empty list
// elements are ignored, RFC 9110 section 5.6.1; an obs-fold has already been
// replaced by a space, RFC 9112 section 5.2). Everything else is refused
// before any of the body is read, and the caller answers 400 and closes the
// connection: RFC 9112 section 6.3 requires that for a final coding other
// than chunked, and section 6.1 for HTTP/1.0 with Transfer-Encoding and for
// Transfer-Encoding with Content-Length. For a coding that is understood by
// nobody here (`gzip, chunked`) section 6.1 suggests 501; we answer 400 as
// well, since the request cannot be framed by this server either way and one
// answer keeps the rule simple.

#include "common/http/server.h"
#include "common/result.h"

namespace kiln::http {

// Checks the framing of a parsed request header. Pure; any thread.
// Errors: kInvalidArgument with a fixed reason naming the header at fault
// (the client's bytes are never echoed into it).
Status check_request_framing(const RequestHeader& header);

}  // namespace kiln::http
