/*
 * The tools' helpers under their old drl_ names, for drld only.
 *
 * drld/ includes this header and drld/meson.build compiles tools/args.c
 * alone; drld lies outside the change that moved these helpers to
 * tools/common/ under the tl_ prefix (drl_ is the library's public
 * namespace). Until drld includes tools/common/ (and builds its files),
 * these names map onto the tl_ ones. The drl tool does not use this file.
 */
#ifndef DRL_TOOLS_ARGS_H
#define DRL_TOOLS_ARGS_H

#include "common/args.h"
#include "common/json.h"
#include "common/result.h"

#define drl_parse_uint_n tl_parse_uint_n
#define drl_parse_uint tl_parse_uint
#define drl_parse_seconds tl_parse_seconds
#define drl_parse_limit_period tl_parse_limit_period
#define drl_path_name tl_path_name
#define drl_json_str tl_json_str
#define drl_json_escape tl_json_escape
#define drl_ceil_div tl_ceil_div
#define drl_vusage_error tl_vusage_error
#define drl_usage_error tl_usage_error
#define drl_bad_option tl_bad_option

#endif /* DRL_TOOLS_ARGS_H */
