# Host CUDA: rewrites one CUDA source for the host compiler (cmake -DINPUT=a.cu -DOUTPUT=a.cpp -P).
# `kernel<<<grid, block, shared, stream>>>(args)` becomes
# `::host_cuda::launch(kernel, grid, block, shared, stream)(args)`, and a dynamic shared array
# `extern __shared__ __align__(16) T name[];` becomes a pointer to the launch's buffer.
# A launch names one kernel (a function pointer, or a template with its arguments given), as
# the launch takes its address. Everything else is compiled as written (host_cuda.h supplies
# the built-ins).
file(READ "${INPUT}" source)
set(callee "([A-Za-z_][A-Za-z0-9_:]*(<[^<>;{}]*>)?)")
string(REGEX REPLACE "${callee}[ \t\r\n]*<<<([^;]*)>>>[ \t\r\n]*\\("
       "::host_cuda::launch(\\1, \\3)(" source "${source}")
set(alignment "(__align__\\([0-9]+\\)[ \t]+)?")
set(element "([A-Za-z_][A-Za-z0-9_ ]*[A-Za-z0-9_])")
string(REGEX REPLACE
       "extern[ \t]+__shared__[ \t]+${alignment}${element}[ \t]+([A-Za-z_][A-Za-z0-9_]*)\\[\\];"
       "\\2* const \\3 = reinterpret_cast<\\2*>(HOST_CUDA_DYNAMIC_SHARED());" source "${source}")
string(FIND "${source}" "<<<" left)
if(NOT left EQUAL -1)
  message(FATAL_ERROR "host CUDA: ${INPUT} has a launch translate.cmake did not rewrite")
endif()
set(header "// Translated for host CUDA from ${INPUT}\n#line 1 \"${INPUT}\"\n")
file(WRITE "${OUTPUT}.tmp" "${header}${source}")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
