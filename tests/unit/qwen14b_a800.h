/*
 * The fixture of the tests that cost Qwen3-14B on the A800 preset with the planner's default
 * settings (test_plan_replan.c, test_ehp_lend.c): the built-in presets loaded once for the
 * group, the hardware, the model's shape and the settings.
 */
#ifndef TEST_QWEN14B_A800_H
#define TEST_QWEN14B_A800_H

#include "cost/shape.h"
#include "plan/plan.h"
#include "spec/preset.h"

static struct spec_presets presets;
static struct plan_settings settings;
static struct cost_shape shape;
static const struct spec_hardware *hw;

static int setup(void **state)
{
    struct libra_error err;
    if (spec_presets_init(&presets, &err) != 0)
        return -1;
    hw = spec_hardware_find(&presets, "a800-80g");
    plan_settings_default(&settings, hw);
    return cost_shape_init(&shape, spec_model_find(&presets, "qwen3-14b"));
}

static int teardown(void **state)
{
    spec_presets_free(&presets);
    return 0;
}

#endif
