#pragma once
// saccade: one include for everything. Reading order: ops/tensor.h, ops/backend.h, ops/cpu/loop.h,
// ops/elementwise.h, autograd/variable.h, autograd/node.h, autograd/engine.cpp, autograd/functions/*.
#include "autograd/dot.h"
#include "autograd/engine.h"
#include "autograd/format.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/reduce.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/variable.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/format.h"
#include "ops/io.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/tensor.h"
