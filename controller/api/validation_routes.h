#pragma once
// Internal to kiln_api: the validation routes — hardware profiles, stored
// validation reports, and availability.
//
//   POST/GET /v1/profiles, GET/PATCH/DELETE /v1/profiles/{name}
//        staff write (PATCH is a JSON Merge Patch, If-Match optional); any role reads
//   GET  /v1/nodes/{id}/validations     any role (tenants: their own nodes)
//   POST /v1/nodes/{id}/validations     staff: run a plan now (202)
//   GET  /v1/validations/{id}           any role (tenants: their own nodes)
//   GET  /v1/availability               any role

#include "controller/api/route_table.h"

namespace kiln::api {

void add_profile_routes(RouteTable& t, ApiContext& ctx);
void add_validation_routes(RouteTable& t, ApiContext& ctx);
void add_availability_routes(RouteTable& t, ApiContext& ctx);

}  // namespace kiln::api
