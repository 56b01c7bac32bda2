// Optimizers and learning-rate schedulers (torch.optim).
#pragma once

#include "ember/optim/adam.h"
#include "ember/optim/lr_scheduler.h"
#include "ember/optim/optimizer.h"
#include "ember/optim/sgd.h"
