# Writes OUTPUT, a C++ source defining `extern "C" const unsigned char SYMBOL[]` with the bytes of
# INPUT (the CUDA kernels' fatbin, which the library loads through the driver at run time).
# Usage: cmake -DINPUT=... -DOUTPUT=... -DSYMBOL=... -P embed_binary.cmake
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
get_filename_component(name "${INPUT}" NAME)
file(WRITE "${OUTPUT}"
     "// Generated from ${name} at build time.\n"
     "extern \"C\" alignas(64) const unsigned char ${SYMBOL}[] = {${bytes}0};\n")
