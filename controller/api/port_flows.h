#pragma once
// The port flows /v1/ports and the Ironic-compatible /ironic/v1/ports share,
// written once: loading a port by id and deleting it with its event. Each
// route keeps its own body parsing and reply shape.
//
// Threading: coroutines on an I/O thread; store calls run on ctx.deps.db.
// Errors: the store's, and kNotFound "no such port: ID".

#include <string>
#include <utility>  // before Asio (docs/coroutines.md)

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "controller/api/route_table.h"
#include "controller/model/node.h"  // Port

namespace kiln::api {

// The port `id`. Its node becomes the call's node, so the audit row names it.
boost::asio::awaitable<Result<Port>> load_port(ApiContext& ctx, Call& call, std::string id);

// Deletes `port` with a port.deleted event (its detail: port, address, and
// each member of `extra_detail`), shown in its node owner's event feed.
boost::asio::awaitable<Status> delete_port(ApiContext& ctx, Call& call, const Port& port,
                                           nlohmann::json extra_detail = nlohmann::json::object());

}  // namespace kiln::api
