// /v1/ports through the Ironic-compatible API (being written).
#include "controller/ironic/ironic_routes.h"

namespace kiln::ironic {

void add_ironic_port_routes(IronicRouteTable& t, api::ApiContext& ctx) {
  (void)t;
  (void)ctx;
}

}  // namespace kiln::ironic
