#pragma once

namespace at::openreg {

// Routes the functional TensorIterator operators PyTorch serves to PrivateUse1
// through a generated structured default to the CPU fallback, whose meta
// function then lays the result out as on the CPU (StructuredDefaults.cpp).
// Called once when torch_openreg._C is imported, after every static
// registration of this library.
void route_structured_iterator_defaults();

}  // namespace at::openreg
