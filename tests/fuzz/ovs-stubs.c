/*
 * Copyright (c) 2026 The ovs-gpu authors.
 *
 * Licensed under the Apache License, Version 2.0 (the "License");
 * you may not use this file except in compliance with the License.
 * You may obtain a copy of the License at:
 *
 *     http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS,
 * WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 * See the License for the specific language governing permissions and
 * limitations under the License.
 */

/* What the plugin's fuzz targets need of ovs-vswitchd beyond OVS's
 * library: the plugin registers itself with the bridge (vswitchd/
 * bridge.c, which brings all of ofproto with it).  The targets call the
 * parsers themselves and never run the plugin through the bridge, so the
 * registration is dropped. */

#include <config.h>

#include "compiler.h"
#include "ovs-plugin.h"

void
ovs_plugin_register(const struct ovs_plugin_class *class OVS_UNUSED)
{
}
