#include "app.hpp"

int main(int argc, char** argv) { return actsim_cli::actsim_main(argc, argv); }
