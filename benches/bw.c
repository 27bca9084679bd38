// A DRAM read-bandwidth probe for the MoE decode bound (docs/architectures.md):
//   gcc -O2 -mavx512f -pthread benches/bw.c -o /tmp/bw && /tmp/bw 4096 2
// Read bandwidth: THREADS threads sum disjoint halves of an MIB-MiB buffer; best of 5, GB/s.
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static char *buf; static size_t len; static int nth;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void *work(void *a){ long i=(long)a; size_t per=len/nth; const __m512i *p=(const __m512i*)(buf+i*per);
  __m512i s0=_mm512_setzero_si512(),s1=s0,s2=s0,s3=s0; size_t n=per/64;
  for(size_t k=0;k+4<=n;k+=4){s0=_mm512_add_epi64(s0,p[k]);s1=_mm512_add_epi64(s1,p[k+1]);s2=_mm512_add_epi64(s2,p[k+2]);s3=_mm512_add_epi64(s3,p[k+3]);}
  s0=_mm512_add_epi64(_mm512_add_epi64(s0,s1),_mm512_add_epi64(s2,s3)); return (void*)(long)_mm512_reduce_add_epi64(s0);}
int main(int c,char**v){ len=(size_t)atol(v[1])<<20; nth=atoi(v[2]); buf=aligned_alloc(64,len); memset(buf,1,len);
  double best=0; for(int r=0;r<5;r++){ pthread_t t[64]; double t0=now(); for(long i=0;i<nth;i++)pthread_create(&t[i],0,work,(void*)i);
  long s=0; for(int i=0;i<nth;i++){void*x;pthread_join(t[i],&x);s+=(long)x;} double g=len/(now()-t0)/1e9; if(g>best)best=g; if(s==42)puts("");}
  printf("read bandwidth %.2f GB/s (%s MiB, %d threads)\n",best,v[1],nth); return 0;}
