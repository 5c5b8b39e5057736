// A layout source using calc and symbols, as its USES line allows.
#include "ecpi/analyze/calc/calc.h"
#include "ecpi/analyze/calc/flow_inference.h"
#include "ecpi/analyze/symbols/symbolizer.h"
#include "ecpi/analyze/text_table.h"
