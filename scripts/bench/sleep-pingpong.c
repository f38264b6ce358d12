// What a sleeping receiver's way of waiting costs on loopback UDP: a ping-pong of 100-byte
// datagrams between a client (CPU 0) and an echo (CPU 1) whose receivers sleep, either in a
// blocking recvfrom (mode 0: what an unconnected Homa reader does) or in ppoll on the socket
// and an eventfd, then a non-blocking recvfrom (mode 1: a connected or raw-IP Homa reader,
// and the background thread), or in epoll_wait on an epoll set of the two made once, then a
// non-blocking recvfrom (mode 2), or in a blocking recvmmsg of up to 32 into 64 KB buffers with
// MSG_WAITFORONE (mode 3: what an unconnected Homa reader's sleeping call was), of one (mode 4), or
// in a blocking recvmsg with room for control messages (mode 5); both ends use the mode. Modes interleaved in blocks of 200
// round trips. Prints each mode's round-trip p50 and p10 (µs).
// Build: gcc -O2 -o /tmp/sleep-pingpong scripts/bench/sleep-pingpong.c
// Usage: /tmp/sleep-pingpong 0 1 2 0 1 2
#define _GNU_SOURCE
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
static long ns(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000L+t.tv_nsec;}
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);sched_setaffinity(0,sizeof s,&s);}
static int mk(struct sockaddr_in *a){int s=socket(AF_INET,SOCK_DGRAM,0);a->sin_family=AF_INET;a->sin_port=0;a->sin_addr.s_addr=htonl(0x7f000001);bind(s,(void*)a,sizeof *a);socklen_t l=sizeof *a;getsockname(s,(void*)a,&l);return s;}
static int efd; static int ep[64];
static char big[32][65536];
static void rcv(int mode,int s){char b[2048];
 if(mode==0){while(recvfrom(s,b,sizeof b,0,0,0)<0){}return;}
 if(mode==3){struct mmsghdr h[32];struct iovec io[32];struct sockaddr_in a[32];memset(h,0,sizeof h);
  for(int i=0;i<32;i++){io[i].iov_base=big[i];io[i].iov_len=sizeof big[i];h[i].msg_hdr.msg_iov=&io[i];h[i].msg_hdr.msg_iovlen=1;h[i].msg_hdr.msg_name=&a[i];h[i].msg_hdr.msg_namelen=sizeof a[i];}
  while(recvmmsg(s,h,32,MSG_WAITFORONE,0)<1){}return;}
 if(mode==4){struct mmsghdr h;struct iovec io={big[0],sizeof big[0]};struct sockaddr_in a;memset(&h,0,sizeof h);
  h.msg_hdr.msg_iov=&io;h.msg_hdr.msg_iovlen=1;h.msg_hdr.msg_name=&a;h.msg_hdr.msg_namelen=sizeof a;
  while(recvmmsg(s,&h,1,MSG_WAITFORONE,0)<1){}return;}
 if(mode==5){struct msghdr h;struct iovec io={big[0],sizeof big[0]};struct sockaddr_in a;char cm[64];memset(&h,0,sizeof h);
  h.msg_iov=&io;h.msg_iovlen=1;h.msg_name=&a;h.msg_namelen=sizeof a;h.msg_control=cm;h.msg_controllen=sizeof cm;
  while(recvmsg(s,&h,0)<0){}return;}
 for(;;){if(recvfrom(s,b,sizeof b,MSG_DONTWAIT,0,0)>=0)return;
  if(mode==2){struct epoll_event e;epoll_wait(ep[s],&e,1,100);continue;}
  struct pollfd p[2]={{s,POLLIN,0},{efd,POLLIN,0}};struct timespec to={0,100000000};ppoll(p,2,&to,0);}}
static void mkep(int s){ep[s]=epoll_create1(0);struct epoll_event e={EPOLLIN,{.fd=s}};epoll_ctl(ep[s],EPOLL_CTL_ADD,s,&e);struct epoll_event k={EPOLLIN,{.fd=efd}};epoll_ctl(ep[s],EPOLL_CTL_ADD,efd,&k);}
static int cmp(const void*a,const void*b){long x=*(long*)a,y=*(long*)b;return x<y?-1:x>y;}
int main(int c,char**v){int n=c-1,modes[16];for(int i=0;i<n;i++)modes[i]=atoi(v[i+1]);efd=eventfd(0,EFD_NONBLOCK);
 struct sockaddr_in sa[16],ca[16];int S[16],C[16];for(int i=0;i<n;i++){S[i]=mk(&sa[i]);C[i]=mk(&ca[i]);mkep(S[i]);mkep(C[i]);}
 char pay[100]={0};int BL=200,NB=100*n;
 if(!fork()){pin(1);for(int b=0;b<NB;b++){int k=b%n;for(int i=0;i<BL;i++){rcv(modes[k],S[k]);sendto(S[k],pay,100,0,(void*)&ca[k],sizeof ca[k]);}}_exit(0);}
 pin(0);long *lat[16];int cnt[16]={0};for(int i=0;i<n;i++)lat[i]=malloc(8*BL*NB);
 for(int b=0;b<NB;b++){int k=b%n;for(int i=0;i<BL;i++){long t=ns();sendto(C[k],pay,100,0,(void*)&sa[k],sizeof sa[k]);rcv(modes[k],C[k]);if(b>=n)lat[k][cnt[k]++]=ns()-t;}}
 wait(0);
 for(int i=0;i<n;i++){qsort(lat[i],cnt[i],8,cmp);printf("mode %d: rtt p50 %.2f p10 %.2f\n",modes[i],lat[i][cnt[i]/2]/1000.0,lat[i][cnt[i]/10]/1000.0);}
 return 0;}
