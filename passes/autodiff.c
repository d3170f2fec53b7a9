/* Temporary: replaced by reverse-mode autodiff. */
#include "ir.h"
bool pass_autodiff(Graph *g, const PassOptions *po, Diag *d) { (void)g; (void)po; error_at(d, NOLOC, "autodiff is not implemented yet"); return false; }
