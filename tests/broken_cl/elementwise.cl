/* A deliberately broken kernel source: tests/test_opencl.c points
 * SHARDNET_CL_DIR here and expects a build error carrying this log. */
__kernel void unary(__global const float *x, __global float *y)
{
    y[get_global_id(0)] = x[get_global_id(0)] + undeclared_identifier;
}
