/* Temporary: replaced by the optimizer pass. */
#include "ir.h"
bool pass_optimizer(Graph *g, const PassOptions *po, Diag *d) { (void)g; (void)po; error_at(d, NOLOC, "the optimizer pass is not implemented yet"); return false; }
