#pragma once
// Internal to HttpServer: the bytes of a file reply (Reply::file), sent after
// the session has written the header.
//
// Ownership: `body.file` is shared with the Reply (and whatever cache handed
// it out); the stream and logger are borrowed for the call.
// Threading: called from the session's coroutine, on its strand; the call
// stays on that strand.
// Errors: returns true when all `body.length` bytes went out, false when the
// reply was cut short (the peer went away, a write stalled for
// `write_timeout`, the file turned out shorter or unreadable); the connection
// must then be closed, since the client was promised more. A short or
// unreadable file is logged as a warning naming `remote`; a peer that went
// away is not.
//
// OpenFile (server.h) is implemented in file_body.cc as well.

#include <chrono>
#include <string>

#include "common/http/server_stream.h"

namespace kiln::http::detail {

// Plain TCP: sendfile(2) from the page cache, zero-copy.
asio::awaitable<bool> send_file_bytes(PlainStream& stream, const FileBody& body,
                                      std::chrono::seconds write_timeout, const Logger& log,
                                      const std::string& remote);
// TLS: buffered reads, each written with the write deadline.
asio::awaitable<bool> send_file_bytes(TlsStream& stream, const FileBody& body,
                                      std::chrono::seconds write_timeout, const Logger& log,
                                      const std::string& remote);

}  // namespace kiln::http::detail
