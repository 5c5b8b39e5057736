// A cachesim source that reaches into calc: the room check must refuse it
// (cachesim uses only symbols; analyze/cachesim/CMakeLists.txt).
#include "ecpi/analyze/symbols/symbolizer.h"
#include "ecpi/analyze/text_table.h"
  #  include "ecpi/analyze/calc/cfg.h"
